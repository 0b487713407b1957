use std::time::Duration;

use persevere::Classify;

#[derive(Debug, Classify)]
enum ApiError {
    #[permanent]
    Rejected {
        #[retry_after]
        wait: Duration,
    },
}

fn main() {}
