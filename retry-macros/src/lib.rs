//! The macros of [persevere](https://docs.rs/persevere): `#[retry]` and `#[idempotent]`.
//!
//! Use them through the `persevere` crate, which documents them and provides the runtime
//! the generated code calls.
#![forbid(unsafe_code)]

// Lowest first: each module imports only those above it in this list.
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

/// Retries the function on failures a retry can fix. See the `persevere` crate.
#[proc_macro_attribute]
pub fn retry(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::retry(args.into(), item.into()).into()
}

/// Marks a function as safe to repeat, which `#[retry]` requires. See the `persevere`
/// crate.
#[proc_macro_attribute]
pub fn idempotent(args: TokenStream, item: TokenStream) -> TokenStream {
    idempotent::idempotent(args.into(), item.into()).into()
}

/// Implements `persevere::Classify` from a class on each variant. See the `persevere`
/// crate.
#[proc_macro_derive(
    Classify,
    attributes(
        transient,
        permanent,
        unsent,
        uncertain,
        classify,
        retry_after,
        persevere
    )
)]
pub fn derive_classify(input: TokenStream) -> TokenStream {
    derive::classify(input.into()).into()
}
