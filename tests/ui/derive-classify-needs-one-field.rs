use persevere::Classify;

#[derive(Debug, Classify)]
enum ApiError {
    #[classify]
    Io(std::io::Error, String),
}

fn main() {}
