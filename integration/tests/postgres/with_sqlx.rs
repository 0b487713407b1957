//! sqlx's errors against a real PostgreSQL (a throwaway server per test, started by
//! `support/postgres.rs`): each class from a failure the server really produces, and
//! `sqlx::Error` as a `#[retry]` function's error as it is. A module of the `postgres`
//! test, so that both drivers' tests share one binary and one template cluster.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::pg::Postgres;
use persevere::{Class, Classify, RetryBudget, retry};
use sqlx::postgres::{PgConnection, PgPool, PgPoolOptions};
use sqlx::{Connection, Executor, Row};
use tokio::sync::Barrier;

static UNLIMITED: RetryBudget = RetryBudget::unlimited();

fn start() -> Postgres {
    Postgres::start_with(&[("deadlock_timeout", "'10ms'")])
}

async fn pool(server: &Postgres, connections: u32) -> PgPool {
    PgPoolOptions::new()
        .max_connections(connections)
        .acquire_timeout(Duration::from_millis(200))
        .connect(&server.url())
        .await
        .unwrap()
}

/// `accounts` rows 1..=n, each with `balance`.
async fn accounts(pool: &PgPool, n: i32, balance: i64) {
    pool.execute("CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL)")
        .await
        .unwrap();
    sqlx::query("INSERT INTO accounts SELECT i, $2 FROM generate_series(1, $1) AS i")
        .bind(n)
        .bind(balance)
        .execute(pool)
        .await
        .unwrap();
}

async fn balances(pool: &PgPool) -> Vec<i64> {
    let rows = sqlx::query("SELECT balance FROM accounts ORDER BY id")
        .fetch_all(pool)
        .await
        .unwrap();
    rows.iter().map(|row| row.get(0)).collect()
}

/// The SQLSTATE of a database error; "-" for any other.
fn code(e: &sqlx::Error) -> String {
    e.as_database_error()
        .and_then(|db| db.code())
        .map_or_else(|| "-".to_owned(), |code| code.into_owned())
}

/// The attempts of a call, and the failures they saw: SQLSTATE and class.
#[derive(Default)]
struct Seen {
    attempts: AtomicU32,
    failures: Mutex<Vec<(String, Class)>>,
}

impl Seen {
    fn note<T>(&self, outcome: Result<T, sqlx::Error>) -> Result<T, sqlx::Error> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        if let Err(e) = &outcome {
            self.failures.lock().unwrap().push((code(e), e.classify()));
        }
        outcome
    }

    fn attempts(&self) -> u32 {
        self.attempts.load(Ordering::SeqCst)
    }

    fn all(&self) -> Vec<(String, Class)> {
        self.failures.lock().unwrap().clone()
    }
}

const READ: &str = "SELECT balance FROM accounts WHERE id = 1";
const WITHDRAW: &str = "UPDATE accounts SET balance = balance - 10 WHERE id = 1";
const DEPOSIT: &str = "UPDATE accounts SET balance = balance + 1 WHERE id = 1";
const SERIALIZABLE: &str = "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE";

// 40001 is not applied, and a statement run again in the aborted transaction fails
// with 25P02, permanent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serialization_failure_is_not_applied_and_25p02_permanent() {
    let server = start();
    let pool = pool(&server, 4).await;
    accounts(&pool, 1, 100).await;
    let mut tx = pool.begin().await.unwrap();
    tx.execute(SERIALIZABLE).await.unwrap();
    tx.execute(READ).await.unwrap();
    pool.execute(DEPOSIT).await.unwrap();
    let first = tx.execute(WITHDRAW).await.unwrap_err();
    assert_eq!(
        (code(&first), first.classify()),
        ("40001".into(), Class::NotApplied)
    );
    let again = tx.execute(WITHDRAW).await.unwrap_err();
    assert_eq!(
        (code(&again), again.classify()),
        ("25P02".into(), Class::Permanent)
    );
    tx.rollback().await.unwrap();
    assert_eq!(balances(&pool).await, [101]);
}

#[retry(on = not_applied, budget = UNLIMITED, attempts = 3, base = "1ms", cap = "2ms")]
async fn withdraw(pool: &PgPool, seen: &Seen) -> Result<(), sqlx::Error> {
    let outcome = async {
        let mut tx = pool.begin().await?;
        tx.execute(SERIALIZABLE).await?;
        tx.execute(READ).await?;
        if persevere::attempt::number() == 1 {
            pool.execute(DEPOSIT).await?;
        }
        tx.execute(WITHDRAW).await?;
        tx.commit().await
    };
    seen.note(outcome.await)
}

// `sqlx::Error` as the error of a retried transaction, not idempotent: the serialization
// failure is retried, and the second attempt commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_returning_sqlx_errors_is_retried_whole() {
    let server = start();
    let pool = pool(&server, 4).await;
    accounts(&pool, 1, 100).await;
    let seen = Seen::default();
    withdraw(&pool, &seen).await.unwrap();
    assert_eq!(seen.all(), [("40001".to_owned(), Class::NotApplied)]);
    assert_eq!(seen.attempts(), 2);
    assert_eq!(balances(&pool).await, [91]);
}

// Two transactions lock two rows in opposite orders: one is rolled back with 40P01,
// not applied; the other commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadlock_is_not_applied() {
    let server = start();
    let pool = pool(&server, 4).await;
    accounts(&pool, 2, 0).await;
    let barrier = Arc::new(Barrier::new(2));
    let lock = |first: i32, second: i32| {
        let (pool, barrier) = (pool.clone(), barrier.clone());
        tokio::spawn(async move {
            let add = "UPDATE accounts SET balance = balance + 1 WHERE id = $1";
            let mut tx = pool.begin().await?;
            sqlx::query(add).bind(first).execute(&mut *tx).await?;
            barrier.wait().await;
            sqlx::query(add).bind(second).execute(&mut *tx).await?;
            tx.commit().await
        })
    };
    let (a, b) = (lock(1, 2), lock(2, 1));
    let outcomes = [a.await.unwrap(), b.await.unwrap()];
    let failures: Vec<_> = outcomes
        .iter()
        .filter_map(|o| o.as_ref().err())
        .map(|e| (code(e), e.classify()))
        .collect();
    assert_eq!(failures, [("40P01".to_owned(), Class::NotApplied)]);
    assert_eq!(balances(&pool).await, [1, 1]);
}

#[retry(on = not_applied, budget = UNLIMITED, attempts = 3, base = "1ms", cap = "2ms")]
async fn open_account(pool: &PgPool, seen: &Seen) -> Result<(), sqlx::Error> {
    let insert = "INSERT INTO accounts VALUES (1, 0)";
    seen.note(pool.execute(insert).await.map(drop))
}

// A unique violation (23505) is permanent: one attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_constraint_violation_is_permanent() {
    let server = start();
    let pool = pool(&server, 2).await;
    accounts(&pool, 1, 100).await;
    let seen = Seen::default();
    let e = open_account(&pool, &seen).await.unwrap_err();
    assert_eq!(code(&e), "23505");
    assert_eq!(seen.all(), [("23505".to_owned(), Class::Permanent)]);
    assert_eq!(seen.attempts(), 1);
}

#[retry(on = not_applied, budget = UNLIMITED, attempts = 5, base = "5ms", cap = "10ms")]
async fn deposit_connecting(server: &Mutex<Postgres>, seen: &Seen) -> Result<(), sqlx::Error> {
    if persevere::attempt::number() == 3 {
        server.lock().unwrap().start_again();
    }
    let url = server.lock().unwrap().url();
    let outcome = async {
        let mut connection = PgConnection::connect(&url).await?;
        connection.execute(DEPOSIT).await?;
        connection.close().await
    };
    seen.note(outcome.await)
}

// A stopped server refuses the connection: unsent, retried for a write that is not
// idempotent, until the server is back on the third attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_is_unsent_and_retried() {
    let mut server = start();
    let setup = pool(&server, 1).await;
    accounts(&setup, 1, 100).await;
    setup.close().await;
    server.stop();
    let server = Mutex::new(server);
    let seen = Seen::default();
    deposit_connecting(&server, &seen).await.unwrap();
    let refused = ("-".to_owned(), Class::Unsent);
    assert_eq!(seen.all(), [refused.clone(), refused]);
    assert_eq!(seen.attempts(), 3);
    let server = server.into_inner().unwrap();
    assert_eq!(balances(&pool(&server, 1).await).await, [101]);
}

// A pool with no connection free in time sent nothing: unsent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_timed_out_is_unsent() {
    let server = start();
    let pool = pool(&server, 1).await;
    let held = pool.acquire().await.unwrap();
    let e = pool.acquire().await.unwrap_err();
    assert!(matches!(e, sqlx::Error::PoolTimedOut), "{e:?}");
    assert_eq!(e.classify(), Class::Unsent);
    drop(held);
    pool.close().await;
    let e = pool.acquire().await.unwrap_err();
    assert!(matches!(e, sqlx::Error::PoolClosed), "{e:?}");
    assert_eq!(e.classify(), Class::Permanent);
}

// A role's connection limit refuses the connection (53300): unsent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_connections_is_unsent() {
    let server = start();
    let admin = pool(&server, 1).await;
    admin
        .execute("CREATE ROLE clerk LOGIN CONNECTION LIMIT 1")
        .await
        .unwrap();
    let url = format!("postgres://clerk@127.0.0.1:{}/postgres", server.port());
    let _first = PgConnection::connect(&url).await.unwrap();
    let e = PgConnection::connect(&url).await.unwrap_err();
    assert_eq!(
        (code(&e), e.classify()),
        ("53300".to_owned(), Class::Unsent)
    );
}

#[retry(on = not_applied, budget = UNLIMITED, attempts = 3, base = "1ms", cap = "2ms")]
async fn withdraw_noting_pid(
    connection: &mut PgConnection,
    pid: &std::sync::atomic::AtomicI32,
    seen: &Seen,
) -> Result<(), sqlx::Error> {
    let outcome = async {
        let row = connection.fetch_one("SELECT pg_backend_pid()").await?;
        pid.store(row.get(0), Ordering::SeqCst);
        let mut tx = connection.begin().await?;
        tx.execute(WITHDRAW).await?;
        tx.commit().await
    };
    seen.note(outcome.await)
}

// A session terminated while its transaction waits on a lock may have committed, for
// all the client knows: uncertain, and a write that is not idempotent is not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_session_is_uncertain_and_not_retried() {
    let server = start();
    let pool = pool(&server, 4).await;
    accounts(&pool, 1, 100).await;
    let mut lock = pool.begin().await.unwrap();
    lock.execute(DEPOSIT).await.unwrap();
    let mut connection = PgConnection::connect(&server.url()).await.unwrap();
    let pid = Arc::new(std::sync::atomic::AtomicI32::new(0));
    let seen = Arc::new(Seen::default());
    let call = tokio::spawn({
        let (pid, seen) = (pid.clone(), seen.clone());
        async move { withdraw_noting_pid(&mut connection, &pid, &seen).await }
    });
    let waiting =
        "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'";
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let row = sqlx::query(waiting)
            .bind(pid.load(Ordering::SeqCst))
            .fetch_one(&pool)
            .await
            .unwrap();
        if row.get::<i64, _>(0) == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the withdrawal never waited on the lock"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    sqlx::query("SELECT pg_terminate_backend($1)")
        .bind(pid.load(Ordering::SeqCst))
        .execute(&pool)
        .await
        .unwrap();
    let e = call.await.unwrap().unwrap_err();
    assert_eq!(e.classify(), Class::Uncertain, "{e:?}");
    assert_eq!(seen.all().len(), 1);
    assert_eq!(seen.attempts(), 1);
    lock.rollback().await.unwrap();
    assert_eq!(balances(&pool).await, [100]);
}

/// A withdrawal as one statement of a transaction its caller began, handed on as its
/// connection (`&mut *tx`), sqlx's usual way.
#[retry(on = not_applied, budget = UNLIMITED, attempts = 3, base = "1ms", cap = "2ms")]
async fn withdraw_within(conn: &mut PgConnection, seen: &Seen) -> Result<(), sqlx::Error> {
    let outcome = conn.execute(WITHDRAW).await.map(drop);
    seen.note(outcome)
}

// Inside the caller's transaction, the 40001 is returned after one attempt, with a
// reason of its own: run again there, the statement could only fail with 25P02. The
// connection says whether it is in a transaction begun through sqlx, and only then.
// Can fail: the call not asking its `&mut PgConnection`, and retrying inside the aborted
// transaction (2 attempts, the second 25P02).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serialization_failure_inside_the_callers_transaction_is_not_retried_there() {
    use persevere::TransactionAware;
    let server = start();
    let pool = pool(&server, 4).await;
    accounts(&pool, 1, 100).await;
    let mut conn = pool.acquire().await.unwrap();
    assert!(!conn.is_inside_transaction());
    let mut tx = conn.begin().await.unwrap();
    assert!(tx.is_inside_transaction());
    tx.execute(SERIALIZABLE).await.unwrap();
    tx.execute(READ).await.unwrap();
    pool.execute(DEPOSIT).await.unwrap();
    let seen = Seen::default();
    let e = withdraw_within(&mut tx, &seen).await.unwrap_err();
    assert_eq!(code(&e), "40001");
    assert_eq!(seen.all(), [("40001".to_owned(), Class::NotApplied)]);
    assert_eq!(seen.attempts(), 1);
    tx.rollback().await.unwrap();
    assert!(!conn.is_inside_transaction());
    // A `BEGIN` of the caller's own is not counted: sqlx keeps the server's status private.
    conn.execute("BEGIN").await.unwrap();
    assert!(!conn.is_inside_transaction());
    conn.execute("ROLLBACK").await.unwrap();
    let stats = persevere::stats::get("withdraw_within").unwrap();
    assert_eq!(stats.failed.inside_transaction, 1);
    assert_eq!(stats.failed.total(), 1);
}

/// [`withdraw_within`]'s twin, for the test below (each reads its own statistics).
#[retry(on = not_applied, budget = UNLIMITED, attempts = 3, base = "1ms", cap = "2ms")]
async fn withdraw_step(conn: &mut PgConnection, seen: &Seen) -> Result<(), sqlx::Error> {
    let outcome = conn.execute(WITHDRAW).await.map(drop);
    seen.note(outcome)
}

/// The transaction that [`withdraw_step`] is a statement of, retried whole: a deposit
/// conflicts with its first attempt.
#[retry(on = not_applied, budget = UNLIMITED, attempts = 3, base = "1ms", cap = "2ms")]
async fn transfer_whole(pool: &PgPool, seen: &Seen) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    tx.execute(SERIALIZABLE).await?;
    tx.execute(READ).await?;
    if persevere::attempt::number() == 1 {
        pool.execute(DEPOSIT).await?;
    }
    withdraw_step(&mut tx, seen).await?;
    tx.commit().await
}

// The retry happens where the transaction began: the nested call inside it gives up
// after one attempt without marking its failure as retried, and the outer function runs
// the whole transaction again, which commits.
// Can fail: the nested call retrying inside the aborted transaction (its 25P02 then
// returned), or its give-up taken as a nested retry that the outer layer must not repeat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_transaction_is_retried_where_it_began() {
    let server = start();
    let pool = pool(&server, 4).await;
    accounts(&pool, 1, 100).await;
    let seen = Seen::default();
    transfer_whole(&pool, &seen).await.unwrap();
    assert_eq!(seen.all(), [("40001".to_owned(), Class::NotApplied)]);
    assert_eq!(seen.attempts(), 2);
    assert_eq!(balances(&pool).await, [91]);
    let outer = persevere::stats::get("transfer_whole").unwrap();
    assert_eq!((outer.attempts, outer.succeeded), (2, 1));
    let inner = persevere::stats::get("withdraw_step").unwrap();
    assert_eq!(inner.failed.inside_transaction, 1);
    assert_eq!((inner.attempts, inner.succeeded), (2, 1));
}
