//! Writers contending for one SQLite file, with and without `#[retry]`.
//!
//! Run it with `cargo run --example sqlite`. Four threads each insert 100 rows into one
//! database file, with no busy timeout, so a writer that finds the file locked gets
//! `SQLITE_BUSY` at once. Without retries, some inserts fail; with `#[retry]`, which
//! classifies `SQLITE_BUSY` and `SQLITE_LOCKED` as transient, every insert lands, and
//! each exactly once: the row's unique key and the transaction around each attempt make
//! repeating an insert safe.

use std::path::Path;
use std::time::{Duration, Instant};

use persevere::{RetryBudget, idempotent, retry};
use rusqlite::{Connection, TransactionBehavior};

const WRITERS: i64 = 4;
const ROWS: i64 = 100;

// Local contention adds no load to a shared service, so no budget is needed here.
static LOCAL: RetryBudget = RetryBudget::unlimited();

fn insert(conn: &mut Connection, id: i64) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute("INSERT INTO events (id) VALUES (?1)", [id])?;
    tx.commit()
}

#[retry(deadline = "10s", attempts = 1000, base = "1ms", cap = "20ms", budget = LOCAL)]
#[idempotent]
fn insert_retried(conn: &mut Connection, id: i64) -> rusqlite::Result<()> {
    insert(conn, id)
}

fn run(path: &Path, write: fn(&mut Connection, i64) -> rusqlite::Result<()>) -> (usize, i64) {
    let _ = std::fs::remove_file(path);
    Connection::open(path)
        .and_then(|c| c.execute_batch("CREATE TABLE events (id INTEGER PRIMARY KEY)"))
        .expect("create the database");
    let failed = std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                s.spawn(move || {
                    let mut conn = Connection::open(path).expect("open");
                    // No fsync per commit: the locking, which is what contends, is
                    // unchanged, and the example does not wait on the disk. Set while
                    // rusqlite's default busy timeout still applies.
                    conn.pragma_update(None, "synchronous", "OFF")
                        .expect("pragma");
                    conn.busy_timeout(Duration::ZERO).expect("no busy timeout");
                    (0..ROWS)
                        .filter(|row| write(&mut conn, w * ROWS + row).is_err())
                        .count()
                })
            })
            .collect();
        writers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    let stored = Connection::open(path)
        .and_then(|c| c.query_row("SELECT COUNT(DISTINCT id) FROM events", [], |r| r.get(0)))
        .expect("count rows");
    (failed, stored)
}

fn main() {
    let dir = std::env::temp_dir();
    for (label, write) in [
        (
            "without #[retry]",
            insert as fn(&mut Connection, i64) -> rusqlite::Result<()>,
        ),
        ("with #[retry]   ", insert_retried),
    ] {
        let started = Instant::now();
        let (failed, stored) = run(&dir.join("persevere-example.db"), write);
        println!(
            "{label}: {failed:>3} of {} inserts failed, {stored:>3} rows stored, {:?}",
            WRITERS * ROWS,
            started.elapsed()
        );
    }
    println!("\n{}", persevere::stats::all());
}
