use persevere::{idempotent, retry};

#[retry(hedge = "50ms")]
#[idempotent]
async fn fill(buffer: &mut Vec<u8>) -> std::io::Result<usize> {
    buffer.push(1);
    Ok(buffer.len())
}

struct Reader;

impl Reader {
    #[retry(hedge = "50ms")]
    #[idempotent]
    async fn read(&mut self) -> std::io::Result<usize> {
        Ok(0)
    }
}

fn main() {}
