use persevere::{idempotent, retry, OpenTransaction};

// A database transaction of the user's own, marked as one.
struct Tx;
impl OpenTransaction for Tx {}

// By reference, by shared reference, by value, and as the receiver: each is an error at
// its parameter.
#[retry]
#[idempotent]
fn by_mut_ref(tx: &mut Tx) -> std::io::Result<()> {
    let _ = tx;
    Ok(())
}

#[retry]
#[idempotent]
async fn by_ref(tx: &Tx, id: u64) -> std::io::Result<u64> {
    let _ = tx;
    Ok(id)
}

#[retry(on = not_applied)]
fn by_value(tx: Tx) -> std::io::Result<()> {
    let _ = tx;
    Ok(())
}

impl Tx {
    #[retry]
    #[idempotent]
    async fn method(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn main() {}
