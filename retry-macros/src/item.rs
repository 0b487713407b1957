//! A function as the attribute macros need it: its attributes, visibility and signature
//! parsed, its body kept as tokens.
//!
//! Neither macro looks inside the body; they only move it. Parsing every statement of
//! every body with syn's full expression grammar was most of what the macros cost a
//! build (and proc macros run unoptimised in a debug build), so the body stays a token
//! tree, handed back to the compiler as written.

use proc_macro2::{Delimiter, Group};
use syn::parse::{Parse, ParseStream};
use syn::{Attribute, Block, ItemFn, Signature, Visibility};

/// A function with a body, the body unparsed.
pub struct LightFn {
    /// The function, with an empty block in place of its body.
    pub item: ItemFn,
    /// The body, braces included, as written.
    pub body: Group,
}

impl Parse for LightFn {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis: Visibility = input.parse()?;
        let sig: Signature = input.parse()?;
        let body: Group = input.parse()?;
        if body.delimiter() != Delimiter::Brace {
            return Err(syn::Error::new(body.span(), "expected the function's body"));
        }
        let item = ItemFn {
            attrs,
            vis,
            sig,
            block: Box::new(Block {
                brace_token: syn::token::Brace {
                    span: body.delim_span(),
                },
                stmts: Vec::new(),
            }),
        };
        Ok(Self { item, body })
    }
}

/// Whether `attr` is `#[name]` however its path is written: `#[retry]`,
/// `#[persevere::retry]`.
pub fn is_attr(attr: &Attribute, name: &str) -> bool {
    attr.path().segments.last().is_some_and(|s| s.ident == name)
}
