use persevere::{idempotent, retry};

#[retry(hedge = "0ms")]
#[idempotent]
async fn zero() -> std::io::Result<()> {
    Ok(())
}

#[retry(hedge = "500us")]
#[idempotent]
async fn below_the_timer() -> std::io::Result<()> {
    Ok(())
}

#[retry(hedge = "p100")]
#[idempotent]
async fn slowest() -> std::io::Result<()> {
    Ok(())
}

#[retry(hedge = "p30")]
#[idempotent]
async fn low() -> std::io::Result<()> {
    Ok(())
}

#[retry(hedge = "95")]
#[idempotent]
async fn no_unit() -> std::io::Result<()> {
    Ok(())
}

#[retry(hedge = "pfast")]
#[idempotent]
async fn not_a_number() -> std::io::Result<()> {
    Ok(())
}

#[retry(hedge = "pNaN")]
#[idempotent]
async fn nan() -> std::io::Result<()> {
    Ok(())
}

#[retry(hedge = "P95")]
#[idempotent]
async fn capital() -> std::io::Result<()> {
    Ok(())
}

#[retry(hedge = "p5e1")]
#[idempotent]
async fn exponent() -> std::io::Result<()> {
    Ok(())
}

#[retry(hedge = "50ms", deadline = "50ms")]
#[idempotent]
async fn beyond_the_deadline() -> std::io::Result<()> {
    Ok(())
}

#[retry(hedge = "200ms", attempt_timeout = "100ms")]
#[idempotent]
async fn beyond_the_attempt_timeout() -> std::io::Result<()> {
    Ok(())
}

#[retry(hedge = 50)]
#[idempotent]
async fn not_a_string() -> std::io::Result<()> {
    Ok(())
}

#[retry(hedge = "50ms", hedges = 4)]
#[idempotent]
async fn too_many() -> std::io::Result<()> {
    Ok(())
}

#[retry(hedges = 2)]
#[idempotent]
async fn hedges_alone() -> std::io::Result<()> {
    Ok(())
}

fn main() {}
