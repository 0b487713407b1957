use persevere::{idempotent, retry};

// The internal locals of the generated code are invisible to the body. Of the two
// expansions, only the loop in the function's own body (for a function that takes an
// `&mut`) has locals around the body; the other makes each attempt in a closure that has
// none.
#[retry]
#[idempotent]
async fn fill(buffer: &mut Vec<u8>) -> std::io::Result<u32> {
    let _ = &__persevere_run;
    let _ = &__persevere_handling;
    buffer.push(1);
    Ok(1)
}

fn main() {}
