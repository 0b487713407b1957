use std::fmt::Display;
use std::io;

use persevere::{idempotent, retry};

#[retry]
#[idempotent]
async fn shown() -> io::Result<impl Display> {
    Ok(1)
}

#[retry]
#[idempotent]
fn paired() -> Result<(u8, impl Display), io::Error> {
    Ok((1, 2))
}

fn main() {}
