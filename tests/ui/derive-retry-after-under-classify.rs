use std::time::Duration;

use persevere::{Class, Classify};

#[derive(Debug)]
struct Inner;

impl Classify for Inner {
    fn classify(&self) -> Class {
        Class::Transient
    }
}

#[derive(Debug, Classify)]
enum ApiError {
    #[classify]
    Wrapped(#[retry_after] Inner),
    #[transient]
    Overloaded {
        #[retry_after]
        wait: Option<Duration>,
    },
}

fn main() {}
