#![deny(warnings)]

use std::cell::Cell;
use std::rc::Rc;

use persevere::{TransactionAware, idempotent, retry};

// A connection of the user's own that can tell whether a transaction is open on it:
// asked at the start of each call, in every expansion, with no warning.
#[derive(Clone, Default)]
struct Db {
    open: Cell<bool>,
    /// Attempts made, shared by the copies each attempt of a by-value argument gets.
    made: Rc<Cell<u32>>,
}

impl TransactionAware for Db {
    fn is_inside_transaction(&self) -> bool {
        self.open.get()
    }
}

fn fail(db: &Db) -> std::io::Result<u32> {
    db.made.set(db.made.get() + 1);
    Err(std::io::ErrorKind::TimedOut.into())
}

#[retry(attempts = 2, base = "1ms")]
#[idempotent]
async fn by_ref(db: &Db) -> std::io::Result<u32> {
    fail(db)
}

#[retry(attempts = 2, base = "1ms")]
#[idempotent]
async fn by_mut_ref(db: &mut Db, id: u32) -> std::io::Result<u32> {
    fail(db).or(Ok(id)).and_then(|_| fail(db))
}

#[retry(attempts = 2, base = "1ms")]
#[idempotent]
fn blocking(db: Box<Db>) -> std::io::Result<u32> {
    fail(&db)
}

#[retry(attempts = 2, base = "1ms", hedge = "1s")]
#[idempotent]
async fn hedged(db: &Db) -> std::io::Result<u32> {
    fail(db)
}

// A connection inside another value is not asked: retried as any other call.
#[retry(attempts = 2, base = "1ms")]
#[idempotent]
async fn in_tuple(pair: &(Db, u32)) -> std::io::Result<u32> {
    fail(&pair.0)
}

impl Db {
    #[retry(attempts = 2, base = "1ms")]
    #[idempotent]
    fn method(&self) -> std::io::Result<u32> {
        fail(self)
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let mut db = Db::default();
    db.open.set(true);
    assert!(rt.block_on(by_ref(&db)).is_err());
    assert!(rt.block_on(by_mut_ref(&mut db, 1)).is_err());
    assert!(rt.block_on(hedged(&db)).is_err());
    assert!(db.method().is_err());
    assert_eq!(db.made.get(), 5); // one attempt each, two statements in `by_mut_ref`
    assert!(blocking(Box::new(db.clone())).is_err());
    assert_eq!(db.made.get(), 6);
    assert!(rt.block_on(in_tuple(&(db.clone(), 0))).is_err());
    assert_eq!(db.made.get(), 8); // not asked: retried
    db.open.set(false);
    assert!(rt.block_on(by_ref(&db)).is_err());
    assert_eq!(db.made.get(), 10); // retried outside a transaction
}
