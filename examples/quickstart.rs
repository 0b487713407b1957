//! The quick start: a function that fails twice with a transient error, then succeeds.
//!
//! Run it with `cargo run --example quickstart`. Each attempt prints when it started; the
//! gaps between them are the backoff waits (200 ms, then 400 ms, each with full jitter,
//! so anywhere from zero up to that). persevere's own events (target `persevere`) are
//! printed through `tracing-subscriber`, and the function's statistics at the end.

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use persevere::{idempotent, retry};

/// A stand-in for a flaky dependency: the first two calls have their connection reset.
struct Inventory {
    calls: AtomicU32,
    started: Instant,
}

impl Inventory {
    // Retried on transient failures (`std::io::Error` knows which kinds are transient),
    // for at most 10 s in all, with waits of min(2 s, 200 ms * 2^n), fully jittered.
    // Reading stock is safe to repeat, hence `#[idempotent]`: without it, this does not
    // compile.
    #[retry(deadline = "10s", base = "200ms", cap = "2s", jitter = "full", on = transient)]
    #[idempotent]
    async fn stock(&self, sku: &str) -> io::Result<u32> {
        let attempt = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let at = self.started.elapsed().as_millis();
        if attempt <= 2 {
            println!("attempt {attempt} at {at:>4} ms: connection reset (transient, will retry)");
            return Err(io::ErrorKind::ConnectionReset.into());
        }
        println!("attempt {attempt} at {at:>4} ms: ok");
        Ok(if sku == "tea" { 42 } else { 0 })
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> io::Result<()> {
    // Show persevere's DEBUG events: each failed attempt with its error and next wait.
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .without_time()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();

    let inventory = Inventory {
        calls: AtomicU32::new(0),
        started: Instant::now(),
    };
    let stock = inventory.stock("tea").await?;
    println!(
        "stock of tea: {stock}, after {} attempts in {} ms",
        inventory.calls.load(Ordering::SeqCst),
        inventory.started.elapsed().as_millis()
    );
    println!("\n{}", persevere::stats::all());
    Ok(())
}
