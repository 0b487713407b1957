use persevere::retry;

#[retry]
struct Client {
    url: String,
}

fn main() {
    let client = Client { url: String::new() };
    let _ = client.url;
}
