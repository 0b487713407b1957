use persevere::{idempotent, retry};

// The internal names of the generated code are invisible to the body: of a function
// whose attempts a closure makes, and of one whose attempts run in a loop in its own
// body (it takes an `&mut`), which has internal locals.
#[retry]
#[idempotent]
async fn fetch() -> std::io::Result<u32> {
    let _ = &__persevere_call;
    Ok(1)
}

#[retry]
#[idempotent]
async fn fill(buffer: &mut Vec<u8>) -> std::io::Result<u32> {
    let _ = &__persevere_call;
    let _ = &__persevere_outcome;
    buffer.push(1);
    Ok(1)
}

fn main() {}
