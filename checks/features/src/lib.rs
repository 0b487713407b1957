//! What each cargo feature adds, used as a user would, through `persevere` alone. Built
//! once per feature by CI; with no feature, the core that is always there.

use std::io;

use persevere::{idempotent, retry};

/// The core: a retried function.
#[retry(deadline = "1s")]
#[idempotent]
pub async fn core() -> io::Result<u32> {
    Ok(1)
}

/// `tracing`: the events of a retried call go to the subscriber of the caller's.
#[cfg(feature = "tracing")]
pub fn tracing() -> persevere::stats::Report {
    persevere::stats::all()
}

/// `metrics`: a retried function, whose calls are counted through the `metrics` facade.
#[cfg(feature = "metrics")]
#[persevere::retry]
#[persevere::idempotent]
pub async fn metrics() -> std::io::Result<u32> {
    Ok(1)
}

/// `http`: statuses and `Retry-After`.
#[cfg(feature = "http")]
pub fn http(status: http::StatusCode, headers: &http::HeaderMap) -> persevere::Class {
    use persevere::Classify;
    match persevere::http::check(status, headers) {
        Ok(()) => persevere::Class::Permanent,
        Err(e) => e.classify(),
    }
}

/// `reqwest`: a retried request.
#[cfg(feature = "reqwest")]
#[retry(deadline = "5s")]
#[idempotent]
pub async fn reqwest(client: &reqwest::Client) -> Result<String, persevere::reqwest::RequestError> {
    use persevere::reqwest::ResponseExt;
    Ok(client
        .get("http://127.0.0.1:1/")
        .send()
        .await?
        .error_for_retry()?
        .text()
        .await?)
}

/// `tower`: the layer that installs incoming deadlines.
#[cfg(feature = "tower")]
pub fn tower<S>(service: S) -> persevere::tower::DeadlineService<S> {
    use tower_layer::Layer;
    persevere::tower::DeadlineLayer::new().layer(service)
}

/// `rusqlite`: a retried query.
#[cfg(feature = "rusqlite")]
#[retry(deadline = "1s")]
#[idempotent]
pub fn rusqlite(db: &rusqlite::Connection) -> Result<i64, rusqlite::Error> {
    db.query_row("SELECT 1", [], |row| row.get(0))
}

/// `anyhow`: a retried function that returns `anyhow::Result`.
#[cfg(feature = "anyhow")]
#[retry(deadline = "1s")]
#[idempotent]
pub async fn anyhow() -> anyhow::Result<u32> {
    Ok(1)
}

/// `tonic`: a retried gRPC call, whose attempts are cut at their own time limit, and the
/// channel layer.
#[cfg(feature = "tonic")]
#[retry(deadline = "1s", attempt_timeout = "200ms")]
#[idempotent]
pub async fn tonic() -> Result<u32, tonic::Status> {
    Err(tonic::Status::unavailable("down"))
}

/// `tonic`: a client's channel, wrapped.
#[cfg(feature = "tonic")]
pub fn tonic_channel<S>(channel: S) -> persevere::tonic::RetryMetadata<S> {
    persevere::tonic::RetryMetadata::new(channel)
}

/// `postgres`: a transaction retried whole on what proves it took no effect, its
/// statements bounded by the attempt's time.
#[cfg(feature = "postgres")]
#[retry(on = not_applied, deadline = "5s", attempt_timeout = "1s")]
pub async fn postgres(
    client: &mut tokio_postgres::Client,
) -> Result<u64, persevere::postgres::PostgresError> {
    let tx = client.transaction().await?;
    persevere::postgres::set_statement_timeout(&tx).await?;
    let rows = tx.execute("UPDATE accounts SET balance = 0", &[]).await?;
    tx.commit().await?;
    Ok(rows)
}

/// `sqlx`: a transaction whose error is `sqlx::Error` as it is, cut at its attempt's
/// limit.
#[cfg(feature = "sqlx")]
#[retry(on = not_applied, deadline = "5s", attempt_timeout = "1s")]
pub async fn sqlx(pool: &sqlx::PgPool) -> Result<u64, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let done = sqlx::query("UPDATE accounts SET balance = 0")
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(done.rows_affected())
}

/// `transactions`: a transaction type of the user's own, checked like persevere's; one
/// whose body rolls back to a savepoint of its own is let through.
#[cfg(feature = "transactions")]
pub mod transactions {
    /// A transaction of the user's own.
    pub struct Tx;

    impl persevere::OpenTransaction for Tx {}

    /// Retried inside the transaction, from a savepoint.
    #[persevere::retry(deadline = "1s")]
    #[persevere::idempotent]
    pub async fn inside(#[savepoint] tx: &mut Tx) -> std::io::Result<u32> {
        let _ = tx;
        Ok(1)
    }
}
