#![deny(warnings)]
// A crate that forbids a lint the generated code would otherwise allow.
#![forbid(unreachable_code)]

// A body that begins with inner attributes keeps them, in every expansion: blocking,
// async, async with an `&mut` (the attempt loops in the function's own body), hedged.

use std::io;

use persevere::{idempotent, retry};

#[retry(attempts = 2)]
#[idempotent]
fn blocking(x: u32) -> io::Result<u32> {
    #![allow(unused_variables)]
    let unused = 1;
    Ok(x)
}

#[retry(attempts = 2)]
#[idempotent]
async fn in_one_future(x: u32) -> io::Result<u32> {
    #![allow(unused_variables)]
    #![allow(clippy::let_unit_value)]
    let unused = ();
    Ok(x)
}

#[retry(attempts = 2)]
#[idempotent]
async fn in_a_loop(x: &mut u32) -> io::Result<u32> {
    #![allow(unused_variables)]
    let unused = 1;
    *x += 1;
    Ok(*x)
}

#[retry(hedge = "10ms")]
#[idempotent]
async fn hedged(x: u32) -> io::Result<u32> {
    #![allow(unused_variables)]
    let unused = 1;
    Ok(x)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(blocking(1).unwrap(), 1);
    assert_eq!(in_one_future(2).await.unwrap(), 2);
    let mut x = 2;
    assert_eq!(in_a_loop(&mut x).await.unwrap(), 3);
    assert_eq!(hedged(4).await.unwrap(), 4);
}
