//! Compile-time behaviour of `#[retry]` and `#[idempotent]`: every misuse is rejected
//! with a message at the offending tokens, and every supported shape compiles cleanly.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
