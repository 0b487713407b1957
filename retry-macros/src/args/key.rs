//! One argument, `key = value`: the entry that says how a key's value is read, and where
//! a value ends.

use proc_macro2::TokenStream;
use syn::parse::ParseStream;

use crate::args::parsed::Args;

/// One key of `#[retry(...)]`: its name, an example of its use for the errors, and how
/// its value is parsed into the arguments (`false` if the key was already given).
pub struct Key {
    pub name: &'static str,
    pub example: &'static str,
    pub parse: fn(&Key, ParseStream, &mut Args) -> syn::Result<bool>,
}

/// Sets `field` to `value` unless it is set already.
pub fn set<T>(field: &mut Option<T>, value: T) -> bool {
    let fresh = field.is_none();
    if fresh {
        *field = Some(value);
    }
    fresh
}

/// The tokens up to the next comma (or the end), consumed.
pub fn until_comma(input: ParseStream) -> TokenStream {
    input
        .step(|cursor| {
            let mut tokens = TokenStream::new();
            let mut rest = *cursor;
            while let Some((tt, next)) = rest.token_tree() {
                if matches!(&tt, proc_macro2::TokenTree::Punct(p) if p.as_char() == ',') {
                    break;
                }
                tokens.extend([tt]);
                rest = next;
            }
            Ok((tokens, rest))
        })
        .unwrap_or_default()
}
