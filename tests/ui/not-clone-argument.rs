use persevere::{idempotent, retry};

struct Request {
    id: u64,
}

#[retry]
#[idempotent]
async fn send(request: Request) -> std::io::Result<u64> {
    Ok(request.id)
}

fn main() {}
