#![deny(warnings)]

// A result with `impl Trait` in it, in each expansion: the driver's result defines the
// opaque type, as a body's tail would.

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

#[retry]
#[idempotent]
async fn filled(buffer: &mut Vec<u8>) -> io::Result<impl Iterator<Item = u8>> {
    buffer.push(1);
    Ok(buffer.clone().into_iter())
}

#[retry(hedge = "10ms")]
#[idempotent]
async fn hedged(id: u32) -> Result<impl Display + Send, io::Error> {
    Ok(id)
}

struct Service {
    base: u32,
}

impl Service {
    #[retry]
    #[idempotent]
    async fn get(&self, x: u32) -> Result<impl Display + '_, io::Error> {
        Ok(self.base + x)
    }

    #[retry]
    #[idempotent]
    fn count(&mut self) -> Result<impl Iterator<Item = u32>, io::Error> {
        self.base += 1;
        Ok(0..self.base)
    }
}

fn main() {
    let _ = (shown(), paired(), hedged(1));
    let mut buffer = Vec::new();
    let _ = filled(&mut buffer);
    let mut service = Service { base: 1 };
    let _ = service.get(2);
    let _ = service.count();
}
