//! The macros of [persevere](https://docs.rs/persevere): `#[retry]`, `#[idempotent]` and
//! `#[derive(Classify)]`.
//!
//! Use them through the `persevere` crate, which re-exports them and provides the
//! runtime the generated code calls; their documentation is the same on both crates.
//! (The examples are compiled and run as doc tests of `persevere`, which they use.)
#![deny(missing_docs)]
#![forbid(unsafe_code)]

// Each module imports only those below it in the order `checks/layering` keeps.
mod args;
mod derive;
mod diag;
mod duration;
mod expand;
mod func;
mod idempotent;
mod item;
mod valid;

use proc_macro::TokenStream;

#[doc = include_str!("../doc/retry.md")]
#[proc_macro_attribute]
pub fn retry(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::retry(args.into(), item.into(), None).into()
}

#[doc = include_str!("../doc/idempotent.md")]
#[proc_macro_attribute]
pub fn idempotent(args: TokenStream, item: TokenStream) -> TokenStream {
    idempotent::idempotent(args.into(), item.into()).into()
}

#[doc = include_str!("../doc/classify.md")]
#[proc_macro_derive(
    Classify,
    attributes(
        transient,
        permanent,
        unsent,
        not_applied,
        uncertain,
        classify,
        timed_out,
        retry_after,
        persevere
    )
)]
pub fn derive_classify(input: TokenStream) -> TokenStream {
    derive::classify(input.into()).into()
}
