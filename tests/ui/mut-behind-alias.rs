use persevere::{idempotent, retry};

type Buffer<'a> = &'a mut Vec<u8>;

#[retry]
#[idempotent]
async fn fill(buffer: Buffer<'_>) -> std::io::Result<usize> {
    buffer.push(1);
    Ok(buffer.len())
}

fn main() {}
