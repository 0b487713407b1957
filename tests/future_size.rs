//! `#[retry]` keeps an async function's future small: at most 128 bytes larger than the
//! future of the same function without the attribute, plus the one timer that cuts an
//! attempt still running at the deadline (a tokio `Sleep`: 96 bytes, 112 with tokio's
//! `test-util`). The timer must sit beside the attempt, so no body can hide it in its own
//! space; the wait between attempts reuses the attempt's space, so a body smaller than a
//! `Sleep` costs no more.
//!
//! A future's size is paid on every call (it is moved into the caller's future, often
//! by `memcpy`) and by every future that awaits it. The sizes are printed
//! (`cargo test --test future_size -- --nocapture`), together with the pieces the
//! generated code keeps alive across an `.await`, so a regression can be traced to one.

use std::hint::black_box;
use std::mem::{size_of, size_of_val};
use std::time::Duration;

use persevere::__private::{AsyncRun, Policy};
use persevere::{Class, Classify, RetryState, idempotent, retry};

/// The most `#[retry]` may add to a function's future, besides the deadline's timer.
const MAX_GROWTH: usize = 128;

#[derive(Debug, PartialEq)]
struct Failure;

impl Classify for Failure {
    fn classify(&self) -> Class {
        Class::Transient
    }
}

impl From<persevere::AttemptTimedOut> for Failure {
    fn from(_: persevere::AttemptTimedOut) -> Self {
        Failure
    }
}

async fn trivial(x: u64) -> Result<u64, Failure> {
    black_box(Ok(x + 1))
}

#[retry]
#[idempotent]
async fn trivial_retried(x: u64) -> Result<u64, Failure> {
    black_box(Ok(x + 1))
}

async fn sleeps(x: u64) -> Result<u64, Failure> {
    tokio::time::sleep(Duration::from_millis(1)).await;
    black_box(Ok(x + 1))
}

#[retry]
#[idempotent]
async fn sleeps_retried(x: u64) -> Result<u64, Failure> {
    tokio::time::sleep(Duration::from_millis(1)).await;
    black_box(Ok(x + 1))
}

/// Holds a buffer across an await: the body's own state dominates.
async fn buffered(x: u64) -> Result<u64, Failure> {
    let buffer = black_box([x as u8; 256]);
    tokio::time::sleep(Duration::from_millis(1)).await;
    black_box(Ok(u64::from(buffer[7]) + 1))
}

#[retry]
#[idempotent]
async fn buffered_retried(x: u64) -> Result<u64, Failure> {
    let buffer = black_box([x as u8; 256]);
    tokio::time::sleep(Duration::from_millis(1)).await;
    black_box(Ok(u64::from(buffer[7]) + 1))
}

/// Checks one pair, printing both sizes.
fn check(name: &str, plain: usize, retried: usize, bound: usize) -> Result<(), String> {
    let growth = retried.saturating_sub(plain);
    println!(
        "{name:<10} plain {plain:>4} B   #[retry] {retried:>4} B   growth {growth:>4} B (at most {bound})"
    );
    if retried <= plain + bound {
        Ok(())
    } else {
        Err(format!(
            "`{name}`: #[retry] grows the future by {growth} bytes ({plain} -> {retried}), more than {bound}"
        ))
    }
}

/// What the generated code keeps across an `.await`: printed to explain a failure.
fn print_pieces() {
    println!("pieces:");
    println!(
        "  Run (the call's core and timer)   {:>4} B",
        size_of::<AsyncRun<'static, Result<u64, Failure>>>()
    );
    println!(
        "  RetryState                        {:>4} B",
        size_of::<RetryState<'static>>()
    );
    println!(
        "  Policy                            {:>4} B",
        size_of::<Policy>()
    );
    println!(
        "  tokio::time::Sleep                {:>4} B",
        size_of::<tokio::time::Sleep>()
    );
}

#[test]
fn retry_adds_at_most_128_bytes_and_the_deadline_timer_to_a_future() {
    let bound = MAX_GROWTH + size_of::<tokio::time::Sleep>();
    let results = [
        check(
            "trivial",
            size_of_val(&trivial(1)),
            size_of_val(&trivial_retried(1)),
            bound,
        ),
        check(
            "sleeps",
            size_of_val(&sleeps(1)),
            size_of_val(&sleeps_retried(1)),
            bound,
        ),
        check(
            "buffered",
            size_of_val(&buffered(1)),
            size_of_val(&buffered_retried(1)),
            bound,
        ),
    ];
    print_pieces();
    let failures: Vec<String> = results.into_iter().filter_map(Result::err).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
