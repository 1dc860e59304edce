//! `#[vramtest]`: registers a training-step function with the vramtest harness.
//!
//! Options are checked at compile time, with the same parsers the harness uses, so a typo in a limit is a compile error at the
//! attribute, not a surprise in CI.

use proc_macro::TokenStream;
use quote::quote;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, ItemFn, Lit, Meta, Token};

/// Marks `fn name(t: &mut vramtest::Step) -> vramtest::Result<()>` as a memory test.
///
/// Options (all optional):
/// - `iterations = 5`: iterations of `t.iterations()` (default 3);
/// - `ignore` or `ignore = "reason"`: skipped unless run with `--ignored`;
/// - `tolerance = "+2% | 1MiB"`: the allowed growth of every category and the peak;
/// - `peak = ".."`, `leak = ".."`, or a category (`activations = "+5%"`): one limit;
/// - `budget = "22GiB"`: the peak must stay under this, whatever the snapshot says;
/// - `devices = "cpu"` or `"cpu, cuda"`: where the test can run (default: both).
#[proc_macro_attribute]
pub fn vramtest(attr: TokenStream, item: TokenStream) -> TokenStream {
    match expand(attr.into(), item.into()) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand(
    attr: proc_macro2::TokenStream,
    item: proc_macro2::TokenStream,
) -> syn::Result<proc_macro2::TokenStream> {
    let func: ItemFn = syn::parse2(item)?;
    let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(attr)?;

    let mut iterations = quote!(::core::option::Option::None);
    let mut ignore = quote!(::core::option::Option::None);
    let mut budget = quote!(::core::option::Option::None);
    let mut limits = Vec::new();
    let mut devices: Vec<String> = Vec::new();

    for meta in metas {
        let key = meta
            .path()
            .get_ident()
            .map(|i| i.to_string())
            .ok_or_else(|| syn::Error::new_spanned(meta.path(), "expected an option name"))?;
        match (&meta, key.as_str()) {
            (Meta::Path(_), "ignore") => ignore = quote!(::core::option::Option::Some("")),
            (Meta::NameValue(nv), "ignore") => {
                let reason = string(&nv.value)?;
                ignore = quote!(::core::option::Option::Some(#reason));
            }
            (Meta::NameValue(nv), "iterations") => {
                let n = match &nv.value {
                    Expr::Lit(ExprLit {
                        lit: Lit::Int(i), ..
                    }) => i.base10_parse::<u32>()?,
                    other => {
                        return Err(syn::Error::new_spanned(
                            other,
                            "`iterations` takes an integer, like `iterations = 5`",
                        ));
                    }
                };
                if n == 0 {
                    return Err(syn::Error::new_spanned(
                        &nv.value,
                        "`iterations` must be at least 1",
                    ));
                }
                iterations = quote!(::core::option::Option::Some(#n));
            }
            (Meta::NameValue(nv), "budget") => {
                let text = string(&nv.value)?;
                let bytes = vramtest_model::parse_bytes(&text)
                    .map_err(|e| syn::Error::new_spanned(&nv.value, e))?;
                budget = quote!(::core::option::Option::Some(#bytes));
            }
            (Meta::NameValue(nv), "devices") => {
                for d in string(&nv.value)?.split(',').map(str::trim) {
                    if !matches!(d, "cpu" | "cuda") {
                        return Err(syn::Error::new_spanned(
                            &nv.value,
                            format!("unknown device `{d}` (expected `cpu` or `cuda`)"),
                        ));
                    }
                    devices.push(d.to_owned());
                }
            }
            (Meta::NameValue(nv), k)
                if k == "tolerance"
                    || k == "peak"
                    || k == "leak"
                    || k.parse::<vramtest_model::Category>().is_ok() =>
            {
                let text = string(&nv.value)?;
                text.parse::<vramtest_model::Limit>()
                    .map_err(|e| syn::Error::new_spanned(&nv.value, e))?;
                limits.push(quote!((#k, #text)));
            }
            _ => {
                return Err(syn::Error::new_spanned(
                    &meta,
                    format!(
                        "unknown or malformed option `{key}` (expected iterations = N, ignore, ignore = \"reason\", tolerance = \"+2% | 1MiB\", peak/leak/<category> = \"..\", budget = \"22GiB\", devices = \"cpu, cuda\")"
                    ),
                ));
            }
        }
    }

    let name = &func.sig.ident;
    let name_str = name.to_string();
    Ok(quote! {
        #func

        ::vramtest::__private::inventory::submit! {
            ::vramtest::__private::TestDef {
                name: #name_str,
                module: ::core::module_path!(),
                file: ::core::file!(),
                line: ::core::line!(),
                func: #name,
                options: ::vramtest::__private::Options {
                    iterations: #iterations,
                    ignore: #ignore,
                    limits: &[#(#limits),*],
                    budget: #budget,
                    devices: &[#(#devices),*],
                },
            }
        }
    })
}

fn string(e: &Expr) -> syn::Result<String> {
    match e {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Ok(s.value()),
        other => Err(syn::Error::new_spanned(other, "expected a string literal")),
    }
}
