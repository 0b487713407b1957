//! A function as the attribute macros need it: its attributes, visibility and signature
//! parsed, its body kept as tokens.
//!
//! Neither macro looks inside the body; they only move it. Parsing every statement of
//! every body with syn's full expression grammar would be most of what the macros cost
//! a build (proc macros run unoptimised in a debug build), so the body stays a token
//! tree, handed back to the compiler as written.

use proc_macro2::{Delimiter, Group, Ident, Span, TokenStream, TokenTree};
use syn::parse::{ParseStream, Parser};
use syn::{Attribute, Block, ItemFn, Path, Signature, Visibility};

/// A function with a body, the body unparsed.
pub struct LightFn {
    /// The function, with an empty block in place of its body.
    pub item: ItemFn,
    /// The body, braces included, as written.
    pub body: Group,
}

impl LightFn {
    /// `tokens`, a function as written, as its parsed head and its body. The body is
    /// split off before syn sees the tokens: syn copies every token it parses into a
    /// buffer of its own, and the body is most of a function's tokens.
    pub fn split(tokens: TokenStream) -> syn::Result<Self> {
        let mut trees: Vec<TokenTree> = tokens.into_iter().collect();
        let body = match trees.pop() {
            Some(TokenTree::Group(group)) if group.delimiter() == Delimiter::Brace => group,
            Some(last) => {
                return Err(syn::Error::new(last.span(), "expected the function's body"));
            }
            None => return Err(syn::Error::new(Span::call_site(), "expected a function")),
        };
        let head = |input: ParseStream<'_>| {
            let attrs = input.call(Attribute::parse_outer)?;
            let vis: Visibility = input.parse()?;
            let sig: Signature = input.parse()?;
            Ok((attrs, vis, sig))
        };
        let (attrs, vis, sig) = head.parse2(trees.into_iter().collect())?;
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

/// The body's inner attributes (`#![allow(...)]`, each `#`, `!` and `[...]`) and the
/// statements after them. The attributes belong at the top of the function the body
/// ends up in: a closure's or an async block's body cannot begin with one.
pub fn inner_attributes(body: &Group) -> (TokenStream, TokenStream) {
    let trees: Vec<TokenTree> = body.stream().into_iter().collect();
    let inner = trees
        .chunks(3)
        .take_while(|tokens| match tokens {
            [
                TokenTree::Punct(hash),
                TokenTree::Punct(bang),
                TokenTree::Group(group),
            ] => {
                hash.as_char() == '#'
                    && bang.as_char() == '!'
                    && group.delimiter() == Delimiter::Bracket
            }
            _ => false,
        })
        .count()
        * 3;
    (
        trees[..inner].iter().cloned().collect(),
        trees[inner..].iter().cloned().collect(),
    )
}

/// Whether `attr` is `#[name]` however its path is written: `#[retry]`,
/// `#[persevere::retry]`.
pub fn is_attr(attr: &Attribute, name: &str) -> bool {
    attr.path().segments.last().is_some_and(|s| s.ident == name)
}

/// The name of the item that resolves a `#[retry]`'s path which the compiler never
/// resolved (an `#[idempotent]` above it expanded it): `#[retry]` on it expands to the
/// item unchanged.
pub const RETRY_MARK: &str = "__persevere_retry_mark";

/// Items that make the compiler resolve `path`, an attribute macro's (`#[idempotent]`
/// read by `#[retry]` below it, or a `#[retry]` that `#[idempotent]` above it
/// expanded), so that its import is used: an empty function under that attribute, and
/// a use of the function. No lint needs allowing, which a crate's `forbid` would refuse.
pub fn resolving(path: &Path, name: &str) -> TokenStream {
    let mark = Ident::new(name, Span::mixed_site());
    quote::quote! {
        #[#path]
        fn #mark() {}
        let _ = #mark;
    }
}

/// Whether `item` is the function [`resolving`] makes for a `#[retry]`'s path.
pub fn is_retry_mark(item: &TokenStream) -> bool {
    let mut trees = item.clone().into_iter();
    matches!(trees.next(), Some(TokenTree::Ident(f)) if f == "fn")
        && matches!(trees.next(), Some(TokenTree::Ident(name)) if name == RETRY_MARK)
}
