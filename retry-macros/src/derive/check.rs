//! Checking that a variant's marks fit its fields: each misfit is reported at the mark or
//! the variant's name, saying what to write.

use proc_macro2::Span;
use syn::{Attribute, Field, Fields, Ident};

use crate::derive::attr::{Class, Marked, class_of, retry_after};
use crate::diag::push;

/// A variant (or the struct) whose marks fit its fields.
pub enum Checked<'a> {
    /// A class of its own, and the field marked `#[retry_after]`, with its position, if
    /// any: a wait it holds makes the class `RetryAfter`.
    Class(Class, Option<(usize, &'a Field)>),
    /// `#[classify]`: its single field's own `Classify` impl says.
    Delegate(&'a Field),
    /// `#[timed_out]`: its single field is the `AttemptTimedOut` of an attempt cut short.
    TimedOut(&'a Field),
}

/// The variant `name`, its attributes `attrs` and its fields, checked; `None` if its
/// marks do not fit, the problem reported.
pub fn variant<'a>(
    attrs: &[Attribute],
    fields: &'a Fields,
    name: &Ident,
    errors: &mut Option<syn::Error>,
) -> Option<Checked<'a>> {
    let marked = class_of(attrs, name, errors)?;
    let waits = retry_after(fields);
    if let Some((_, _, extra)) = waits.get(1) {
        push(
            errors,
            syn::Error::new(
                *extra,
                "only one field can be `#[retry_after]`: the server gives one wait",
            ),
        );
        return None;
    }
    match fit(marked, waits.first().copied(), fields, name) {
        Ok(checked) => Some(checked),
        Err(e) => {
            push(errors, e);
            None
        }
    }
}

/// The variant `name`, marked `marked`, with `fields`, and `wait`, its one field marked
/// `#[retry_after]` (its position, the field, its mark), if any; or why they do not fit.
fn fit<'a>(
    marked: Marked,
    wait: Option<(usize, &'a Field, Span)>,
    fields: &'a Fields,
    name: &Ident,
) -> syn::Result<Checked<'a>> {
    match (marked, wait) {
        (Marked::Class(Class::Permanent), Some((_, _, mark))) => Err(syn::Error::new(
            mark,
            format!(
                "`{name}` is `#[permanent]`, so it is never retried and a `#[retry_after]` field would be ignored; mark it #[transient] or remove #[retry_after]"
            ),
        )),
        (Marked::Class(class), wait) => Ok(Checked::Class(class, wait.map(|(i, f, _)| (i, f)))),
        (Marked::Delegate, Some((_, _, mark))) => Err(syn::Error::new(
            mark,
            format!(
                "`{name}` is `#[classify]`: its field's own `Classify` impl says how to classify it (and what wait the server asked for), so a `#[retry_after]` mark here would be ignored; remove it, or mark the variant #[transient] to use this field's wait"
            ),
        )),
        (Marked::Delegate, None) if fields.len() != 1 => Err(syn::Error::new(
            name.span(),
            format!(
                "`#[classify]` asks the variant's single field how to classify it, but `{name}` has {} fields; mark the variant #[transient], #[permanent], #[unsent] or #[uncertain] instead",
                fields.len()
            ),
        )),
        (Marked::Delegate, None) => Ok(Checked::Delegate(only(fields))),
        (Marked::TimedOut, None) if fields.len() == 1 => Ok(Checked::TimedOut(only(fields))),
        (Marked::TimedOut, _) => Err(syn::Error::new(
            name.span(),
            format!(
                "`#[timed_out]` marks the variant that holds the `persevere::AttemptTimedOut` of an attempt cut short, as its only field, but `{name}` has {} fields; write `{name}(persevere::AttemptTimedOut)`",
                fields.len()
            ),
        )),
    }
}

/// The only field of `fields`, which has one.
fn only(fields: &Fields) -> &Field {
    fields.iter().next().expect("one field")
}

/// At most one variant is `#[timed_out]`: the one `From<AttemptTimedOut>` makes.
/// `timed_out` is how many are, in the type `name`.
pub fn one_timed_out(name: &Ident, timed_out: usize, errors: &mut Option<syn::Error>) {
    if timed_out > 1 {
        push(
            errors,
            syn::Error::new(
                name.span(),
                "only one variant can be `#[timed_out]`: it is the one `From<persevere::AttemptTimedOut>` makes",
            ),
        );
    }
}
