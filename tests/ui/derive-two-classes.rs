use persevere::Classify;

#[derive(Debug, Classify)]
enum ApiError {
    #[transient]
    #[permanent]
    Timeout,
}

fn main() {}
