#![deny(warnings)]

use persevere::{idempotent, retry, OpenTransaction};

// A payment type named `Transaction` is not a database transaction: the check is by
// type, not by name.
#[derive(Clone)]
pub struct Transaction {
    pub amount: u64,
}

#[retry]
#[idempotent]
async fn record(transaction: &Transaction) -> std::io::Result<u64> {
    Ok(transaction.amount)
}

#[retry(on = not_applied)]
fn record_owned(transaction: Transaction) -> std::io::Result<u64> {
    Ok(transaction.amount)
}

// An open transaction whose body rolls back to a savepoint of its own before each
// attempt (CockroachDB's retry protocol), marked so.
struct Tx;
impl OpenTransaction for Tx {}

#[retry]
#[idempotent]
async fn inside_savepoint(#[savepoint] tx: &mut Tx, id: u64) -> std::io::Result<u64> {
    let _ = tx;
    Ok(id)
}

// A generic parameter is not known to be a transaction.
#[retry]
#[idempotent]
fn generic<T: Clone>(value: T) -> std::io::Result<T> {
    Ok(value)
}

// A parameter bound by a pattern is probed by its type.
#[retry]
#[idempotent]
fn destructured((a, b): (u64, u64)) -> std::io::Result<u64> {
    Ok(a + b)
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let payment = Transaction { amount: 5 };
    assert_eq!(rt.block_on(record(&payment)).unwrap(), 5);
    assert_eq!(record_owned(payment.clone()).unwrap(), 5);
    assert_eq!(rt.block_on(inside_savepoint(&mut Tx, 7)).unwrap(), 7);
    assert_eq!(generic(3u8).unwrap(), 3);
    assert_eq!(destructured((1, 2)).unwrap(), 3);
}
