use persevere::Classify;

#[derive(Debug, Classify)]
enum ApiError {
    #[transient]
    Unavailable,
    #[timed_out]
    TimedOut(std::time::Duration),
}

fn main() {}
