use persevere::{idempotent, retry};

#[retry]
#[idempotent]
fn with_savepoint(#[savepoint(name = "s1")] tx: &mut u64) -> std::io::Result<()> {
    let _ = tx;
    Ok(())
}

fn main() {}
