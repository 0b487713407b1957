use persevere::Classify;

#[derive(Debug, Classify)]
enum ApiError {
    #[transient]
    Throttled {
        #[retry_after]
        seconds: u64,
    },
}

fn main() {}
