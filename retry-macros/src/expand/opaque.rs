//! The return type where an expression names it: a signature may name an `impl Trait`,
//! an expression may not, so the generated code writes a stand-in in its place.

use quote::quote;
use syn::Type;

use crate::diag::locate;

/// `ty` with `stand_in` in place of each `impl Trait` in it (with `_`, `Result<impl
/// Display, E>` becomes `Result<_, E>`), in the generic arguments, tuples, references,
/// arrays and slices that may hold one. Only a signature may name an `impl Trait`.
pub fn with_opaque_as(ty: &Type, stand_in: &Type) -> Type {
    let mut ty = ty.clone();
    replace_opaque(&mut ty, stand_in);
    ty
}

fn replace_opaque(ty: &mut Type, stand_in: &Type) {
    match ty {
        Type::ImplTrait(opaque) => {
            let span = opaque.impl_token.span;
            *ty = syn::parse2(locate(quote!(#stand_in), span)).expect("a type");
        }
        Type::Group(group) => replace_opaque(&mut group.elem, stand_in),
        Type::Paren(paren) => replace_opaque(&mut paren.elem, stand_in),
        Type::Reference(reference) => replace_opaque(&mut reference.elem, stand_in),
        Type::Array(array) => replace_opaque(&mut array.elem, stand_in),
        Type::Slice(slice) => replace_opaque(&mut slice.elem, stand_in),
        Type::Tuple(tuple) => {
            for elem in &mut tuple.elems {
                replace_opaque(elem, stand_in);
            }
        }
        Type::Path(path) => {
            for segment in &mut path.path.segments {
                if let syn::PathArguments::AngleBracketed(arguments) = &mut segment.arguments {
                    for argument in &mut arguments.args {
                        if let syn::GenericArgument::Type(ty) = argument {
                            replace_opaque(ty, stand_in);
                        }
                    }
                }
            }
        }
        _ => {}
    }
}
