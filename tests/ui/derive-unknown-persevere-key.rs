use persevere::Classify;

#[derive(Debug, Classify)]
#[persevere(krate = "::persevere")]
enum ApiError {
    #[transient]
    Overloaded,
}

fn main() {}
