//! The grammar of the keys whose value names something of the user's: a `static`
//! (`budget`, `breaker`), a function (`before_wait`), a parameter (`key`), or the crate
//! persevere is under (`crate`).

use syn::parse::{ParseStream, discouraged::Speculative};
use syn::{Ident, LitStr, Path, Token};

use crate::args::key::until_comma;

/// `key = NAME`, the path of a `static` or a function, which `declaration` declares.
/// Anything else, such as an expression (`RetryBudget::new()`, a closure), is reported
/// whole, with how to name it.
pub fn named(input: ParseStream, key: &str, what: &str, declaration: &str) -> syn::Result<Path> {
    let fork = input.fork();
    if let Ok(path) = fork.parse::<Path>() {
        if fork.is_empty() || fork.peek(Token![,]) {
            input.advance_to(&fork);
            return Ok(path);
        }
    }
    let span = input.span();
    let value = until_comma(input);
    let message = format!(
        "`{key}` names {what}, not an expression: declare `{declaration}` and write `{key} = NAME`"
    );
    Err(if value.is_empty() {
        syn::Error::new(span, message)
    } else {
        syn::Error::new_spanned(value, message)
    })
}

/// `key = name`, the name of a parameter.
pub fn key_param(input: ParseStream) -> syn::Result<Ident> {
    input.parse::<Ident>().map_err(|e| {
        syn::Error::new(
            e.span(),
            "expected the name of a parameter: `key = idempotency_key`",
        )
    })
}

/// `crate = "path"`, the path of persevere for a crate that depends on it under another
/// name.
pub fn krate(input: ParseStream) -> syn::Result<Path> {
    let lit: LitStr = input.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            "expected a path in a string: `crate = \"my_persevere\"`",
        )
    })?;
    lit.parse::<Path>()
}
