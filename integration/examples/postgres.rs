//! Money transfers in `SERIALIZABLE` transactions, retried whole when PostgreSQL rolls
//! one back.
//!
//! Run it with `cargo run -p persevere-integration --example postgres`. It starts a
//! throwaway PostgreSQL server from the system's binaries (Debian's package
//! `postgresql`; the same harness as the tests, `tests/support/postgres.rs`), makes 4
//! accounts of 1,000 each, and has 8 tasks make 200 transfers among them at once. Each
//! conflict the server resolves by rolling a transaction back (`40001`
//! serialization_failure, `40P01` deadlock_detected) is printed as it is retried, then
//! the total (unchanged) and the statistics. It shows:
//!
//! - a transfer, not idempotent, retried with `on = not_applied`: only failures that
//!   prove the transaction took no effect;
//! - `#[retry]` on the function that begins and commits, so each attempt runs the whole
//!   transaction afresh;
//! - a budget sized for contention (conflicts answered at once by a server that is up),
//!   not for an outage.

#[path = "../tests/support/postgres.rs"]
mod pg;

use std::sync::OnceLock;
use std::time::Instant;

use persevere::postgres::{PostgresError, set_statement_timeout};
use persevere::{BeforeWait, RetryBudget, retry};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio_postgres::{Client, IsolationLevel};

/// The time origin the lines print from.
static STARTED: OnceLock<Instant> = OnceLock::new();

fn ms() -> u128 {
    STARTED.get_or_init(Instant::now).elapsed().as_millis()
}

/// Up to 4 retries per call on average, and a burst of 64: most attempts that conflict
/// are answered within a millisecond, so retrying costs the server little.
static CONTENTION: RetryBudget = RetryBudget::new()
    .with_ratio(4.0)
    .with_floor(64)
    .with_reserve(64);

/// One line per retried conflict.
fn conflict(retry: &BeforeWait<'_, PostgresError>) {
    let code = retry.error.code().map_or("-", |c| c.code());
    println!(
        "{:>6} ms  attempt {} rolled back ({code}), next in {:.1?}",
        ms(),
        retry.attempt,
        retry.wait
    );
}

#[retry(
    on = not_applied,
    budget = CONTENTION,
    attempts = 30,
    deadline = "10s",
    base = "2ms",
    cap = "64ms",
    before_wait = conflict
)]
async fn transfer(
    client: &mut Client,
    from: i32,
    to: i32,
    amount: i64,
) -> Result<(), PostgresError> {
    let tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::Serializable)
        .start()
        .await?;
    set_statement_timeout(&tx).await?;
    let debit = "UPDATE accounts SET balance = balance - $2 WHERE id = $1";
    tx.execute(debit, &[&from, &amount]).await?;
    let credit = "UPDATE accounts SET balance = balance + $2 WHERE id = $1";
    tx.execute(credit, &[&to, &amount]).await?;
    Ok(tx.commit().await?)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    const TASKS: u64 = 8;
    const TRANSFERS: u64 = 25; // per task
    let server = pg::Postgres::start_with(&[("deadlock_timeout", "'10ms'")]);
    let setup = server.connect().await;
    setup
        .batch_execute(
            "CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
             INSERT INTO accounts SELECT i, 1000 FROM generate_series(1, 4) AS i",
        )
        .await?;
    println!(
        "PostgreSQL on 127.0.0.1:{}; {TASKS} tasks make {} transfers\n",
        server.port(),
        TASKS * TRANSFERS
    );
    ms();
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..TASKS {
        let mut client = server.connect().await;
        tasks.spawn(async move {
            let mut rng = SmallRng::seed_from_u64(task);
            for _ in 0..TRANSFERS {
                let from = rng.random_range(1..=4);
                let to = (from + rng.random_range(0..3)) % 4 + 1;
                transfer(&mut client, from, to, rng.random_range(1..=50)).await?;
            }
            Ok::<_, PostgresError>(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    let total: i64 = setup
        .query_one("SELECT sum(balance)::bigint FROM accounts", &[])
        .await?
        .get(0);
    println!(
        "\nall committed after {} ms; total {total} (was 4000)\n",
        ms()
    );
    println!("{}", persevere::stats::all());
    Ok(())
}
