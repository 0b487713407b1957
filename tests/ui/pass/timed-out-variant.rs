#![deny(warnings)]

// The README's `#[timed_out]` variant, in a crate that only matches it: its field is
// read by the derived `Classify`, so no "field is never read".

use persevere::{AttemptTimedOut, Classify};

#[derive(Debug, Classify)]
enum ApiError {
    #[transient]
    Unavailable,
    #[timed_out]
    TimedOut(AttemptTimedOut),
}

fn main() {
    let cut = ApiError::from(AttemptTimedOut::after(std::time::Duration::from_secs(2)));
    assert!(matches!(cut, ApiError::TimedOut(_)));
    assert_eq!(cut.classify(), persevere::Class::Transient);
    let _ = ApiError::Unavailable;
}
