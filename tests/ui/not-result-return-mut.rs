use persevere::{idempotent, retry};

#[retry]
#[idempotent]
async fn fill(buffer: &mut Vec<u8>) -> (usize, bool) {
    buffer.push(1);
    (buffer.len(), true)
}

fn main() {}
