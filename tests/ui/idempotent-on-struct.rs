use persevere::idempotent;

#[idempotent]
struct Payment {
    cents: u64,
}

fn main() {
    let _ = Payment { cents: 1 }.cents;
}
