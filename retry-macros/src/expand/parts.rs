//! What both expansions of a function make the same way: its head (less the marks read),
//! its `Site`, its handling, and its body, split into the inner attributes that go to the
//! top of the generated function and the statements an attempt runs.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::{Attribute, Ident, ItemFn, Path, Signature, Type, Visibility};

use crate::args::parsed::Args;
use crate::expand::handling::handling;
use crate::expand::opaque::with_opaque_as;
use crate::expand::site::site_static;
use crate::func::RetryFn;
use crate::item::{RETRY_MARK, inner_attributes, is_attr, resolving};

/// A name of the generated code's own, which the body cannot see or shadow.
pub fn hidden(name: &str) -> Ident {
    Ident::new(name, Span::mixed_site())
}

/// The pieces of a generated function that both expansions share.
pub struct Parts {
    /// The function's attributes, less an `#[idempotent]` already read.
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub sig: Signature,
    /// The declared return type, for the signature.
    pub output: Type,
    /// The return type where an expression names it: the declared one with `_` for
    /// each `impl Trait` in it, which only a signature may name. The driver's result
    /// then defines the opaque type, as a body's tail does.
    pub named: Type,
    /// Statements that give each attempt its own copy of the arguments.
    pub rebinds: Vec<TokenStream>,
    /// Whether the function takes an `&mut`, which only a loop in its own body can lend
    /// to each attempt in turn.
    pub exclusive: bool,
    /// The name of the function's `Site` static, and its declaration.
    pub site: Ident,
    pub site_static: TokenStream,
    /// A `use` of each mark's path (`#[idempotent]`, an expanded `#[retry]`), so that its
    /// import stays used.
    pub marks: TokenStream,
    /// The checks of the arguments, before the call: `idempotency_key(&key);` for `key =
    /// ...`, and each parameter's check that it is not an open transaction.
    pub checks: TokenStream,
    /// The `Handling` the driver is given.
    pub handling: TokenStream,
    /// The body's inner attributes, for the top of the generated function.
    pub inner: TokenStream,
    /// The body's statements, which each attempt runs.
    pub stmts: TokenStream,
    /// The statement that gives an attempt the function's return type; see `Parts::new`.
    pub typed: TokenStream,
    /// Where the body was written.
    pub body: Span,
}

impl Parts {
    /// The pieces of the function `plan` plans, with `body` its body as written.
    /// `written_above` is the path of a `#[retry]` that an `#[idempotent]` above it
    /// expanded.
    pub fn new(
        args: &Args,
        private: &TokenStream,
        plan: RetryFn,
        body: &proc_macro2::Group,
        checks: TokenStream,
        written_above: Option<&Path>,
    ) -> Self {
        let site = hidden("__PERSEVERE_SITE");
        let fake = hidden("__persevere_fake_return");
        let site_static = site_static(args, private, &site, &plan.item.sig.ident);
        let named = with_opaque_as(&plan.output, &syn::parse_quote!(_));
        let handling = handling(
            args,
            &plan.output,
            plan.item.sig.asyncness.is_some(),
            private,
        );
        let RetryFn {
            item,
            output,
            rebinds,
            exclusive,
            ..
        } = plan;
        let ItemFn {
            mut attrs,
            vis,
            sig,
            ..
        } = item;
        let marks = marks(&mut attrs, written_above);
        // The body's inner attributes go to the top of the generated function, which
        // holds the body; the fake return gives the attempt's async block the function's
        // return type before its body is checked, so `?`, `return` and the tail coerce
        // and infer as they would in the function itself (`Err(Box::new(e))` into a
        // `Box<dyn Error>`). It neither diverges nor needs a lint allowed, which a
        // crate's `forbid` would refuse.
        let (inner, stmts) = inner_attributes(body);
        let typed = quote! {
            if let ::core::option::Option::Some(#fake) = ::core::option::Option::<#named>::None {
                return #fake;
            }
        };
        Parts {
            attrs,
            vis,
            sig,
            output,
            named,
            rebinds,
            exclusive,
            site,
            site_static,
            marks,
            checks,
            handling,
            inner,
            stmts,
            typed,
            body: body.span(),
        }
    }
}

/// The marks read, as items that resolve their paths, each `#[idempotent]` removed
/// from `attrs`.
///
/// `#[idempotent]` below `#[retry]` has done its work (it was read above): dropped, it
/// does not expand the generated function a second time for nothing, and an empty
/// function under it keeps the import of its path used; likewise the path of a
/// `#[retry]` that an `#[idempotent]` above it expanded, which the compiler never
/// resolved.
fn marks(attrs: &mut Vec<Attribute>, written_above: Option<&Path>) -> TokenStream {
    let mut marks = TokenStream::new();
    if let Some(path) = written_above {
        marks.extend(resolving(path, RETRY_MARK));
    }
    attrs.retain(|attr| {
        let read = is_attr(attr, "idempotent") && matches!(attr.meta, syn::Meta::Path(_));
        if read {
            marks.extend(resolving(attr.path(), "__persevere_idempotent_mark"));
        }
        !read
    });
    marks
}
