//! The arguments of `#[retry(...)]`, parsed with their spans so that every error points
//! at its own token, and all of them reported in one compile: what they are once read
//! ([`parsed`]), one `key = value` ([`key`]), the grammar of each family of keys
//! ([`schedule`], [`failures`], [`named`], [`hedge`]), and the keys accepted ([`keys`]).
//! This file reads the attribute's list through them.

mod failures;
mod hedge;
mod key;
mod keys;
mod named;
pub mod parsed;
mod schedule;

use proc_macro2::TokenStream;
use syn::parse::{ParseStream, Parser};
use syn::{Ident, Token};

use crate::args::key::until_comma;
use crate::args::keys::{KEYS, names};
use crate::args::parsed::Args;
use crate::diag::push;

mod kw {
    syn::custom_keyword!(__idempotent);
}

/// Parses the attribute's tokens. Every malformed argument adds an error and parsing
/// goes on at the next comma, so one compile reports them all.
pub fn parse(tokens: TokenStream) -> (Args, Option<syn::Error>) {
    let mut args = Args::default();
    let mut errors: Option<syn::Error> = None;
    let parser = |input: ParseStream| {
        while !input.is_empty() {
            if let Err(e) = parse_one(input, &mut args) {
                push(&mut errors, e);
                until_comma(input);
            }
            if input.is_empty() {
                break;
            }
            if let Err(e) = input.parse::<Token![,]>() {
                push(&mut errors, e);
                until_comma(input);
                let _ = input.parse::<Token![,]>();
            }
        }
        Ok(())
    };
    if let Err(e) = parser.parse2(tokens) {
        push(&mut errors, e);
    }
    (args, errors)
}

/// One argument, `key = value`, into `args`.
fn parse_one(input: ParseStream, args: &mut Args) -> syn::Result<()> {
    // The mark that a function is safe to repeat is `#[idempotent]` itself (see
    // `idempotent.rs`), never an argument a user could write by hand to pass the check;
    // this one is refused by name, saying what to write.
    if input.peek(kw::__idempotent) {
        return Err(syn::Error::new(
            input.parse::<kw::__idempotent>()?.span,
            "`__idempotent` is not an argument of `#[retry]`; remove it, and if running the function twice is harmless, mark the function `#[idempotent]`",
        ));
    }
    let key = if input.peek(Token![crate]) {
        let token = input.parse::<Token![crate]>()?;
        Ident::new("crate", token.span)
    } else if input.peek(Ident) {
        input.call(syn::ext::IdentExt::parse_any)?
    } else {
        return Err(syn::Error::new(
            input.span(),
            format!(
                "expected an argument `key = value`; the keys are: {}",
                names()
            ),
        ));
    };
    let name = key.to_string();
    let Some(entry) = KEYS.iter().find(|entry| entry.name == name) else {
        return Err(syn::Error::new(
            key.span(),
            format!("unknown argument `{name}`; expected one of: {}", names()),
        ));
    };
    if !input.peek(Token![=]) {
        return Err(syn::Error::new(
            key.span(),
            format!("expected `{name} = ...`; {}", entry.example),
        ));
    }
    input.parse::<Token![=]>()?;
    if !(entry.parse)(entry, input, args)? {
        return Err(syn::Error::new(
            key.span(),
            format!("duplicate argument `{name}`; give each argument once"),
        ));
    }
    args.written.push((entry.name, key.span()));
    Ok(())
}
