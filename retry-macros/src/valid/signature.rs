//! What the function under `#[retry]` must be: not `const`, returning a `Result`, and
//! taking `self`, if at all, by reference. Each error points at the offending tokens and
//! says what to write.

use quote::quote;
use syn::{FnArg, ItemFn, ReturnType, Signature, Type, TypeParamBound};

use crate::diag::push;
use crate::func::bare;

/// What the signature of a function that is repeated must be: not `const`, returning a
/// value, and taking `self`, if at all, by reference.
pub fn signature(item: &ItemFn, errors: &mut Option<syn::Error>) {
    let sig = &item.sig;
    if let Some(constness) = &sig.constness {
        push(
            errors,
            syn::Error::new(
                constness.span,
                "`#[retry]` cannot go on a `const fn`: retrying waits between attempts, which a constant cannot do; remove `const`",
            ),
        );
    }
    if let ReturnType::Default = sig.output {
        push(
            errors,
            syn::Error::new(
                sig.ident.span(),
                format!(
                    "`#[retry]` needs a function that returns `Result`: `{}` returns nothing, so no failure can be seen or retried; declare `-> Result<T, E>`",
                    sig.ident
                ),
            ),
        );
    }
    output(sig, errors);
    for input in &sig.inputs {
        if let FnArg::Receiver(receiver) = input {
            if !matches!(bare(&receiver.ty), Type::Reference(_)) {
                // `self: Arc<Self>`, `self: Box<Self>`: the fix keeps the type.
                let message = if receiver.colon_token.is_some() {
                    format!(
                        "`#[retry]` needs the receiver by reference: every attempt uses it, and a `self` taken by value would be used up by the first attempt; take `self: &{}` (clone it inside the body where an attempt needs its own)",
                        as_written(&receiver.ty)
                    )
                } else {
                    "`#[retry]` needs `&self` or `&mut self`: every attempt uses the receiver, and a `self` taken by value would be used up by the first attempt".to_owned()
                };
                push(errors, syn::Error::new(receiver.self_token.span, message));
            }
        }
    }
}

/// The return type, where it is plainly not a `Result`: reported here, once, at the type.
/// The trait the generated code needs of the type would report it too, but names the
/// runtime's internals, and does so at each place the type is used. A type this cannot
/// judge, such as an alias (`io::Result<T>`, `anyhow::Result<T>`, `type Reply = ...`), is
/// left to the trait.
fn output(sig: &Signature, errors: &mut Option<syn::Error>) {
    let ReturnType::Type(_, ty) = &sig.output else {
        return;
    };
    let written = bare(ty);
    let message = if sig.asyncness.is_none() && is_future(written) {
        let what = match written {
            Type::ImplTrait(_) => "`impl Future`",
            _ => "a future",
        };
        format!(
            "`#[retry]` on a function returning {what} is not supported: write it as an `async fn` returning the `Result`"
        )
    } else if !may_be_result(written) {
        "`#[retry]` needs a function that returns `Result`: this type has no `Err`, so no failure can be seen or retried; declare `-> Result<T, E>`".to_owned()
    } else {
        return;
    };
    push(errors, syn::Error::new_spanned(ty, message));
}

/// `ty` as a user writes it: `Arc<Self>`, not the token stream's `Arc < Self >`.
fn as_written(ty: &Type) -> String {
    let spaced = quote!(#ty).to_string();
    let mut written = String::with_capacity(spaced.len());
    let mut tokens = spaced.split(' ').peekable();
    while let Some(token) = tokens.next() {
        written.push_str(token);
        let next = tokens.peek().copied().unwrap_or_default();
        let joined = ["<", "&", "::", "'"].contains(&token)
            || [">", "<", ",", "::"].contains(&next)
            || next.is_empty();
        if !joined {
            written.push(' ');
        }
    }
    written
}

/// Whether `ty` may be a `Result`: false for the types that plainly are not (`()`, a
/// tuple, a reference, `impl Trait`, a primitive, `String`, `Option<T>`...).
fn may_be_result(ty: &Type) -> bool {
    /// Types of the language and the standard library, by the last segment of their path.
    const NOT_RESULT: &[&str] = &[
        "bool", "char", "str", "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32",
        "i64", "i128", "isize", "f32", "f64", "String", "Option", "Vec", "Box", "Rc", "Arc", "Cow",
        "HashMap", "HashSet", "BTreeMap", "BTreeSet", "VecDeque",
    ];
    match ty {
        Type::Path(path) if path.qself.is_none() => path
            .path
            .segments
            .last()
            .is_none_or(|last| !NOT_RESULT.contains(&last.ident.to_string().as_str())),
        Type::Tuple(_)
        | Type::Reference(_)
        | Type::Array(_)
        | Type::Slice(_)
        | Type::Ptr(_)
        | Type::BareFn(_)
        | Type::Never(_)
        | Type::TraitObject(_)
        | Type::ImplTrait(_) => false,
        // An alias, a generic, an associated type, a macro: the trait decides.
        _ => true,
    }
}

/// Whether `ty` is a future: `impl Future<...>`, `Pin<...>` (a boxed future), or a path
/// ending in `Future` (`BoxFuture<'a, T>`).
fn is_future(ty: &Type) -> bool {
    match ty {
        Type::ImplTrait(bounds) => bounds.bounds.iter().any(|bound| {
            matches!(bound, TypeParamBound::Trait(t)
                if t.path.segments.last().is_some_and(|s| s.ident == "Future"))
        }),
        Type::Path(path) => {
            path.path.segments.last().is_some_and(|last| {
                last.ident == "Pin" || last.ident.to_string().ends_with("Future")
            })
        }
        _ => false,
    }
}
