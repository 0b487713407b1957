//! SQLite contention with a real database file: several threads write to one file with
//! no busy timeout. With `#[retry]`, every write lands exactly once; without, writes fail
//! with `SQLITE_BUSY`.

use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use persevere::{Class, Classify, RetryBudget, TransactionAware, idempotent, retry};
use rusqlite::{Connection, ErrorCode, TransactionBehavior};

const THREADS: i64 = 4;
const ROWS: i64 = 50;

static UNLIMITED: RetryBudget = RetryBudget::unlimited();

/// A fresh database file with one table, its key unique.
fn database(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("persevere-sqlite-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch("CREATE TABLE events (id INTEGER PRIMARY KEY, writer INTEGER NOT NULL)")
        .unwrap();
    path
}

/// A connection that fails at once when another holds the lock: no busy timeout
/// (rusqlite's default is 5 s, which would hide the contention).
fn connect(path: &Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    // No fsync per commit: the locking, which is what contends, is unchanged, and the
    // test does not wait on the disk. Set while rusqlite's default busy timeout applies.
    conn.pragma_update(None, "synchronous", "OFF").unwrap();
    conn.busy_timeout(Duration::ZERO).unwrap();
    conn
}

/// Inserts one row in its own immediate transaction: each attempt is all or nothing, and
/// the row's unique key means a repeated insert could never write it twice.
#[retry(deadline = "20s", attempts = 1000, base = "1ms", cap = "20ms", budget = UNLIMITED)]
#[idempotent]
fn insert_retried(conn: &mut Connection, id: i64, writer: i64) -> rusqlite::Result<()> {
    insert(conn, id, writer)
}

fn insert(conn: &mut Connection, id: i64, writer: i64) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute(
        "INSERT INTO events (id, writer) VALUES (?1, ?2)",
        (id, writer),
    )?;
    tx.commit()
}

/// Runs `THREADS` writers of `ROWS` rows each while the main thread holds the write lock
/// for the first 50 ms; returns how many inserts failed.
fn contend(path: &Path, write: fn(&mut Connection, i64, i64) -> rusqlite::Result<()>) -> usize {
    let blocker = connect(path);
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let start = Barrier::new(THREADS as usize + 1);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|writer| {
                let start = &start;
                s.spawn(move || {
                    let mut conn = connect(path);
                    start.wait();
                    (0..ROWS)
                        .filter(|row| write(&mut conn, writer * ROWS + row, writer).is_err())
                        .count()
                })
            })
            .collect();
        start.wait();
        std::thread::sleep(Duration::from_millis(50));
        // The commit needs every reader gone, and the writers' attempts each hold the
        // read lock for a moment: the blocker waits for them rather than fail (busy) and
        // keep the lock, which would leave every writer retrying until its deadline.
        blocker.busy_timeout(Duration::from_secs(10)).unwrap();
        blocker.execute_batch("COMMIT").unwrap();
        workers
            .into_iter()
            .map(|w| w.join().unwrap())
            .sum::<usize>()
    })
}

fn rows(path: &Path) -> (i64, i64) {
    let conn = connect(path);
    conn.query_row("SELECT COUNT(*), COUNT(DISTINCT id) FROM events", [], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })
    .unwrap()
}

#[test]
fn with_retry_every_write_lands_exactly_once() {
    let path = database("retried.db");
    let failures = contend(&path, insert_retried);
    assert_eq!(failures, 0);
    assert_eq!(rows(&path), (THREADS * ROWS, THREADS * ROWS));
}

#[test]
fn without_retry_writes_fail_busy() {
    let path = database("plain.db");
    let failures = contend(&path, insert);
    // At least each writer's first insert met the held lock.
    assert!(failures >= THREADS as usize, "{failures} failures");
    let (count, distinct) = rows(&path);
    assert_eq!(count, distinct);
    assert_eq!(count, THREADS * ROWS - failures as i64);
}

#[test]
fn busy_and_locked_are_transient_constraints_permanent() {
    let path = database("classes.db");
    let blocker = connect(&path);
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let mut conn = connect(&path);
    let busy = insert(&mut conn, 1, 0).unwrap_err();
    assert_eq!(busy.sqlite_error_code(), Some(ErrorCode::DatabaseBusy));
    assert_eq!(busy.classify(), Class::Transient);
    blocker.execute_batch("COMMIT").unwrap();

    insert(&mut conn, 1, 0).unwrap();
    let duplicate = insert(&mut conn, 1, 0).unwrap_err();
    assert_eq!(
        duplicate.sqlite_error_code(),
        Some(ErrorCode::ConstraintViolation)
    );
    assert_eq!(duplicate.classify(), Class::Permanent);
}

static MADE: AtomicU32 = AtomicU32::new(0);

/// One insert, in whatever transaction `conn` is in: two attempts at most.
#[retry(attempts = 2, base = "1ms", cap = "1ms", budget = UNLIMITED)]
#[idempotent]
fn insert_one(conn: &Connection, id: i64) -> rusqlite::Result<usize> {
    MADE.fetch_add(1, Ordering::SeqCst);
    conn.execute("INSERT INTO events (id, writer) VALUES (?1, 0)", [id])
}

// A transaction of the caller's, handed on as its connection (`&tx` derefs to
// `&Connection`): the busy insert inside it is returned after one attempt, with a reason
// of its own (a permanent failure keeps its own); the same function called outside a
// transaction retries.
// Can fail: the call not asking its connection whether a transaction is open, and
// retrying the statement inside the caller's transaction (2 attempts).
#[test]
fn a_busy_statement_inside_an_open_transaction_is_not_retried_there() {
    let path = database("inside.db");
    let blocker = connect(&path);
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let mut conn = connect(&path);

    let busy = insert_one(&conn, 1).unwrap_err();
    assert_eq!(busy.sqlite_error_code(), Some(ErrorCode::DatabaseBusy));
    assert_eq!(MADE.swap(0, Ordering::SeqCst), 2);

    let tx = conn.transaction().unwrap();
    let busy = insert_one(&tx, 1).unwrap_err();
    assert_eq!(busy.sqlite_error_code(), Some(ErrorCode::DatabaseBusy));
    assert_eq!(MADE.swap(0, Ordering::SeqCst), 1);
    drop(tx);

    let stats = persevere::stats::get("insert_one").unwrap();
    assert_eq!(stats.attempts, 3);
    assert_eq!(stats.failed.attempts_exhausted, 1);
    assert_eq!(stats.failed.inside_transaction, 1);
    assert_eq!(stats.failed.total(), 2);

    // Once the caller's transaction is over, the same connection retries again.
    blocker.execute_batch("COMMIT").unwrap();
    assert_eq!(insert_one(&conn, 1).unwrap(), 1);
    assert_eq!(MADE.load(Ordering::SeqCst), 1);

    // A permanent failure inside a transaction keeps its own reason.
    let tx = conn.transaction().unwrap();
    let duplicate = insert_one(&tx, 1).unwrap_err();
    assert_eq!(
        duplicate.sqlite_error_code(),
        Some(ErrorCode::ConstraintViolation)
    );
    drop(tx);
    let stats = persevere::stats::get("insert_one").unwrap();
    assert_eq!(stats.failed.permanent, 1);
    assert_eq!(stats.failed.inside_transaction, 1);

    // SQLite's own state: rusqlite's other ways into a transaction are told as well.
    let unchecked = conn.unchecked_transaction().unwrap();
    assert!(conn.is_inside_transaction());
    drop(unchecked);
    assert!(!conn.is_inside_transaction());
    conn.execute_batch("BEGIN").unwrap();
    assert!(conn.is_inside_transaction());
}

static MADE_BOXED: AtomicU32 = AtomicU32::new(0);

/// One insert through a boxed connection: two attempts at most.
#[retry(attempts = 2, base = "1ms", cap = "1ms", budget = UNLIMITED)]
#[idempotent]
#[allow(clippy::borrowed_box)] // the form under test
fn insert_boxed(conn: &Box<Connection>, id: i64) -> rusqlite::Result<usize> {
    MADE_BOXED.fetch_add(1, Ordering::SeqCst);
    conn.execute("INSERT INTO events (id, writer) VALUES (?1, 0)", [id])
}

// A boxed connection is asked as the connection in it: inside a transaction begun on
// it, a busy insert is returned after one attempt; once it is over, retried.
// Can fail: the box not passing the question on (2 attempts inside, or 1 outside).
#[test]
fn a_boxed_connection_inside_a_transaction_is_not_retried_there() {
    let path = database("inside-boxed.db");
    let blocker = connect(&path);
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let conn = Box::new(connect(&path));

    conn.execute_batch("BEGIN").unwrap();
    let busy = insert_boxed(&conn, 1).unwrap_err();
    assert_eq!(busy.sqlite_error_code(), Some(ErrorCode::DatabaseBusy));
    assert_eq!(MADE_BOXED.swap(0, Ordering::SeqCst), 1);
    conn.execute_batch("ROLLBACK").unwrap();

    let busy = insert_boxed(&conn, 1).unwrap_err();
    assert_eq!(busy.sqlite_error_code(), Some(ErrorCode::DatabaseBusy));
    assert_eq!(MADE_BOXED.load(Ordering::SeqCst), 2);
}
