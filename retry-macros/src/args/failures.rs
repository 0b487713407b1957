//! The grammar of the keys that say which failures the function retries: `on` (by the
//! error's class, only unsent ones, only ones without effect, or by a predicate) and `layers` (whether failures a
//! nested `#[retry]` call already retried count too).

use syn::parse::ParseStream;
use syn::{LitStr, Path, Token};

use crate::args::key::Key;
use crate::args::parsed::{Layers, On};

mod kw {
    syn::custom_keyword!(transient);
    syn::custom_keyword!(unsent);
    syn::custom_keyword!(not_applied);
}

/// `on = transient`, `on = unsent`, `on = not_applied`, or `on = path::to::predicate`.
pub fn on(input: ParseStream) -> syn::Result<On> {
    if input.peek(kw::transient) && !input.peek2(Token![::]) {
        return Ok(On::Transient(input.parse::<kw::transient>()?.span));
    }
    if input.peek(kw::unsent) && !input.peek2(Token![::]) {
        return Ok(On::Unsent(input.parse::<kw::unsent>()?.span));
    }
    if input.peek(kw::not_applied) && !input.peek2(Token![::]) {
        return Ok(On::NotApplied(input.parse::<kw::not_applied>()?.span));
    }
    let path: Path = input.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            "expected `on = transient`, `on = unsent`, `on = not_applied`, or the path of a function `fn(&E) -> bool`",
        )
    })?;
    Ok(On::Predicate(path))
}

/// `layers = "innermost"` or `layers = "every"`; `key` is the entry of `layers`.
pub fn layers(input: ParseStream, key: &Key) -> syn::Result<Layers> {
    let lit: LitStr = input
        .parse()
        .map_err(|e| syn::Error::new(e.span(), format!("expected {}", key.example)))?;
    match lit.value().as_str() {
        "innermost" => Ok(Layers::Innermost),
        "every" => Ok(Layers::Every),
        other => Err(syn::Error::new(
            lit.span(),
            format!(
                "unknown layers \"{other}\"; expected \"innermost\" (only the innermost of nested #[retry] calls retries a failure, the default) or \"every\" (this function retries even failures a nested #[retry] call already retried)"
            ),
        )),
    }
}
