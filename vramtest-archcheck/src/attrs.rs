//! What the checks read from attributes: test-only modules, `#[path]`, `#[macro_export]`.

use syn::punctuated::Punctuated;
use syn::{Attribute, Meta, Token};

/// Whether an item is compiled for tests only: a `#[cfg(..)]` whose predicate holds
/// only under `test` (`test`, or `all(.., test, ..)`). `any(test, ..)` and `not(test)`
/// are not test-only.
pub fn is_test_only(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<Meta>()
                .map(|m| predicate_needs_test(&m))
                .unwrap_or(false)
    })
}

fn predicate_needs_test(meta: &Meta) -> bool {
    match meta {
        Meta::Path(p) => p.is_ident("test"),
        Meta::List(list) if list.path.is_ident("all") => list
            .parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
            .map(|items| items.iter().any(predicate_needs_test))
            .unwrap_or(false),
        _ => false,
    }
}

/// The value of `#[path = "..."]`, if the item has one.
pub fn path_attr(attrs: &[Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// Whether a `macro_rules!` is `#[macro_export]`ed (it then lives at the crate root).
pub fn is_macro_export(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| a.path().is_ident("macro_export"))
}
