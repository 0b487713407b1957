use persevere::{idempotent, retry};

// Numbers a float parser reads, without a unit: no suggestion that would itself be
// refused (`"pinf"`, `"1e3ms"`, `"-5ms"`, `"0ms"`).
#[retry(hedge = "inf")]
#[idempotent]
async fn infinite() -> std::io::Result<()> {
    Ok(())
}

#[retry(hedge = "1e3")]
#[idempotent]
async fn exponent() -> std::io::Result<()> {
    Ok(())
}

#[retry(hedge = "-5")]
#[idempotent]
async fn negative() -> std::io::Result<()> {
    Ok(())
}

#[retry(hedge = "0")]
#[idempotent]
async fn zero() -> std::io::Result<()> {
    Ok(())
}

// Not a percentile p50 to p99.9: only the delay is suggested.
#[retry(hedge = "20")]
#[idempotent]
async fn twenty() -> std::io::Result<()> {
    Ok(())
}

// A fraction: as seconds, since half a millisecond is below tokio's timer.
#[retry(hedge = "0.5")]
#[idempotent]
async fn half() -> std::io::Result<()> {
    Ok(())
}

fn main() {}
