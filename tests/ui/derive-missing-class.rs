use persevere::Classify;

#[derive(Debug, Classify)]
enum ApiError {
    #[transient]
    Timeout,
    BadRequest(String),
}

fn main() {}
