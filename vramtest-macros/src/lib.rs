//! `#[vramtest]`: registers a training-step function with the vramtest harness.
//!
//! Options are checked at compile time, with the same parsers the harness uses, so a
//! typo in a limit is a compile error at the attribute, not a surprise in CI.

use proc_macro::TokenStream;
use quote::quote;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{
    Expr, ExprLit, FnArg, GenericArgument, GenericParam, ItemFn, Lit, Meta, PathArguments,
    ReturnType, Signature, Token, Type,
};

/// Marks `fn name(t: &mut vramtest::Step) -> vramtest::Result<()>` as a memory test.
/// Another signature (async, generic, other arguments or return type) is a compile
/// error at the part that differs.
///
/// Options (all optional, each at most once):
/// - `iterations = 5`: iterations of `t.iterations()` (default 3);
/// - `ignore` or `ignore = "reason"`: skipped unless run with `--ignored`;
/// - `tolerance = "+2% | 1MiB"`: the allowed growth of the peak and every category but
///   `untracked` (which keeps its wider default unless named);
/// - `peak = ".."`, `reserved = ".."` (a CUDA pool's reserved peak), `leak = ".."`, or a
///   category (`activations = "+5%"`): one limit;
/// - `budget = "22GiB"`: the peak must stay under this, whatever the snapshot says;
/// - `devices = "cpu"` or `"cpu, cuda"`: where the test can run (default: both);
/// - `batch = [64, 128, 256]`: a batch sweep (two or more sizes): the test runs once per
///   size, `t.batch()` says which, and every category is fitted as fixed plus
///   per-sample bytes;
/// - `threads = 4`: the CPU threads of the measured process (default 2, whatever the
///   environment says), and `cpu_only = ".."`: a limit on CPU-only memory (not
///   compared without one).
#[proc_macro_attribute]
pub fn vramtest(attr: TokenStream, item: TokenStream) -> TokenStream {
    match expand(attr.into(), item.into()) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// The function, unchanged, and its registration with the harness.
fn expand(
    attr: proc_macro2::TokenStream,
    item: proc_macro2::TokenStream,
) -> syn::Result<proc_macro2::TokenStream> {
    let func: ItemFn = syn::parse2(item)?;
    check_signature(&func.sig)?;
    let options = Options::parse(attr)?;
    Ok(registration(&func, &options))
}

/// The options of one attribute, as the tokens of the harness's `Options` fields.
struct Options {
    iterations: proc_macro2::TokenStream,
    threads: proc_macro2::TokenStream,
    ignore: proc_macro2::TokenStream,
    budget: proc_macro2::TokenStream,
    limits: Vec<proc_macro2::TokenStream>,
    devices: Vec<String>,
    batch: Vec<usize>,
}

impl Options {
    /// Parses and checks the attribute's options; each may be given at most once.
    fn parse(attr: proc_macro2::TokenStream) -> syn::Result<Options> {
        let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(attr)?;
        let mut options = Options {
            iterations: quote!(::core::option::Option::None),
            threads: quote!(::core::option::Option::None),
            ignore: quote!(::core::option::Option::None),
            budget: quote!(::core::option::Option::None),
            limits: Vec::new(),
            devices: Vec::new(),
            batch: Vec::new(),
        };
        let mut seen: Vec<String> = Vec::new();
        for meta in metas {
            let key = meta
                .path()
                .get_ident()
                .map(|i| i.to_string())
                .ok_or_else(|| syn::Error::new_spanned(meta.path(), "expected an option name"))?;
            if seen.contains(&key) {
                return Err(syn::Error::new_spanned(
                    meta.path(),
                    format!("`{key}` is given more than once (hint: keep one)"),
                ));
            }
            seen.push(key.clone());
            options.set(&meta, &key)?;
        }
        Ok(options)
    }

    /// Sets the option `key` from `meta`, or says why it is unknown or malformed.
    fn set(&mut self, meta: &Meta, key: &str) -> syn::Result<()> {
        match (meta, key) {
            (Meta::Path(_), "ignore") => self.ignore = quote!(::core::option::Option::Some("")),
            (Meta::NameValue(nv), "ignore") => {
                let reason = string(&nv.value)?;
                self.ignore = quote!(::core::option::Option::Some(#reason));
            }
            (Meta::NameValue(nv), "iterations") => {
                let n = positive(&nv.value, "iterations")?;
                self.iterations = quote!(::core::option::Option::Some(#n));
            }
            (Meta::NameValue(nv), "threads") => {
                let n = positive(&nv.value, "threads")?;
                self.threads = quote!(::core::option::Option::Some(#n));
            }
            (Meta::NameValue(nv), "budget") => {
                let text = string(&nv.value)?;
                let bytes = vramtest_model::parse_bytes(&text)
                    .map_err(|e| syn::Error::new_spanned(&nv.value, e))?;
                self.budget = quote!(::core::option::Option::Some(#bytes));
            }
            (Meta::NameValue(nv), "devices") => self.devices.extend(devices(&nv.value)?),
            (Meta::NameValue(nv), "batch") => self.batch = batch_sizes(&nv.value)?,
            // A limit: the names the metadata's `limits` take, from the one list.
            (Meta::NameValue(nv), k) if k.parse::<vramtest_model::LimitKey>().is_ok() => {
                let text = string(&nv.value)?;
                text.parse::<vramtest_model::Limit>()
                    .map_err(|e| syn::Error::new_spanned(&nv.value, e))?;
                self.limits.push(quote!((#k, #text)));
            }
            _ => {
                return Err(syn::Error::new_spanned(
                    meta,
                    format!(
                        "unknown or malformed option `{key}` (expected iterations = N, threads = N, ignore, ignore = \"reason\", tolerance = \"+2% | 1MiB\", peak/reserved/leak/<category> = \"..\", budget = \"22GiB\", devices = \"cpu, cuda\", batch = [64, 128])"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// `iterations = 5`, `threads = 4`: an integer, at least 1.
fn positive(value: &Expr, key: &str) -> syn::Result<u32> {
    let n = match value {
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) => i.base10_parse::<u32>()?,
        other => {
            return Err(syn::Error::new_spanned(
                other,
                format!("`{key}` takes an integer, like `{key} = 5`"),
            ));
        }
    };
    if n == 0 {
        return Err(syn::Error::new_spanned(
            value,
            format!("`{key}` must be at least 1"),
        ));
    }
    Ok(n)
}

/// `devices = "cpu, cuda"`: the devices named, each `cpu` or `cuda`.
fn devices(value: &Expr) -> syn::Result<Vec<String>> {
    let mut devices = Vec::new();
    for d in string(value)?.split(',').map(str::trim) {
        if !matches!(d, "cpu" | "cuda") {
            return Err(syn::Error::new_spanned(
                value,
                format!("unknown device `{d}` (expected `cpu` or `cuda`)"),
            ));
        }
        devices.push(d.to_owned());
    }
    Ok(devices)
}

/// The function followed by its `TestDef`, submitted to the harness's inventory.
fn registration(func: &ItemFn, options: &Options) -> proc_macro2::TokenStream {
    let Options {
        iterations,
        threads,
        ignore,
        budget,
        limits,
        devices,
        batch,
    } = options;
    let name = &func.sig.ident;
    let name_str = name.to_string();
    quote! {
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
                    batch: &[#(#batch),*],
                    threads: #threads,
                },
            }
        }
    }
}

/// `batch = [64, 128, 256]`: two or more distinct batch sizes, each at least 1.
fn batch_sizes(value: &Expr) -> syn::Result<Vec<usize>> {
    const HINT: &str =
        "`batch` takes a list of two or more batch sizes, like `batch = [64, 128, 256]`";
    let Expr::Array(array) = value else {
        return Err(syn::Error::new_spanned(value, HINT));
    };
    let mut sizes = Vec::new();
    for elem in &array.elems {
        let n = match elem {
            Expr::Lit(ExprLit {
                lit: Lit::Int(i), ..
            }) => i.base10_parse::<usize>()?,
            other => return Err(syn::Error::new_spanned(other, HINT)),
        };
        if n == 0 {
            return Err(syn::Error::new_spanned(elem, "a batch size is at least 1"));
        }
        if sizes.contains(&n) {
            return Err(syn::Error::new_spanned(
                elem,
                format!("batch size {n} is given twice"),
            ));
        }
        sizes.push(n);
    }
    if sizes.len() < 2 {
        return Err(syn::Error::new_spanned(value, HINT));
    }
    Ok(sizes)
}

/// The signature the harness calls: `fn name(t: &mut Step) -> vramtest::Result<()>`,
/// neither async nor generic. Errors point at the part that differs.
fn check_signature(sig: &Signature) -> syn::Result<()> {
    const EXPECTED: &str =
        "a #[vramtest] function is `fn name(t: &mut vramtest::Step) -> vramtest::Result<()>`";
    if let Some(a) = &sig.asyncness {
        return Err(syn::Error::new_spanned(
            a,
            format!("{EXPECTED}, not async (hint: block on the future inside the test)"),
        ));
    }
    if let Some(p) = sig
        .generics
        .params
        .iter()
        .find(|p| !matches!(p, GenericParam::Lifetime(_)))
    {
        return Err(syn::Error::new_spanned(
            p,
            format!("{EXPECTED}, not generic (hint: write one test per type)"),
        ));
    }
    if let Some(v) = &sig.variadic {
        return Err(syn::Error::new_spanned(v, EXPECTED));
    }
    let mut inputs = sig.inputs.iter();
    let step_ok = match inputs.next() {
        Some(FnArg::Typed(arg)) => is_mut_step(&arg.ty),
        _ => false,
    };
    if !step_ok {
        let message = format!("{EXPECTED}: it takes one argument, `&mut Step`");
        return Err(match sig.inputs.first() {
            Some(first) => syn::Error::new_spanned(first, message),
            None => syn::Error::new(sig.paren_token.span.join(), message),
        });
    }
    if let Some(extra) = inputs.next() {
        return Err(syn::Error::new_spanned(
            extra,
            format!("{EXPECTED}: it takes one argument, `&mut Step`"),
        ));
    }
    match &sig.output {
        ReturnType::Type(_, ty) if is_unit_result(ty) => Ok(()),
        ReturnType::Type(_, ty) => Err(syn::Error::new_spanned(
            ty,
            format!("{EXPECTED}: it returns `vramtest::Result<()>`"),
        )),
        ReturnType::Default => Err(syn::Error::new_spanned(
            &sig.ident,
            format!("{EXPECTED}: it returns `vramtest::Result<()>` (hint: end it with `Ok(())`)"),
        )),
    }
}

/// `&mut Step` (any path ending in `Step`).
fn is_mut_step(ty: &Type) -> bool {
    match ty {
        Type::Reference(r) if r.mutability.is_some() => {
            matches!(&*r.elem, Type::Path(p) if p.qself.is_none() && p.path.segments.last().is_some_and(|s| s.ident == "Step" && s.arguments.is_none()))
        }
        Type::Paren(p) => is_mut_step(&p.elem),
        _ => false,
    }
}

/// `Result<()>` (any path ending in it: `vramtest::Result<()>`).
fn is_unit_result(ty: &Type) -> bool {
    let Type::Path(p) = ty else { return false };
    let Some(last) = p.path.segments.last() else {
        return false;
    };
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return false;
    };
    last.ident == "Result"
        && p.qself.is_none()
        && args.args.len() == 1
        && matches!(args.args.first(), Some(GenericArgument::Type(Type::Tuple(t))) if t.elems.is_empty())
}

/// A string literal's value.
fn string(e: &Expr) -> syn::Result<String> {
    match e {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Ok(s.value()),
        other => Err(syn::Error::new_spanned(other, "expected a string literal")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;
    use test_case::test_case;

    const GOOD: &str = "fn step(t: &mut Step) -> vramtest::Result<()> { Ok(()) }";

    /// Expands `#[vramtest(attr)] item`; the error's message and its line:column
    /// (1-based line, 0-based column) in `item` (or `attr`).
    fn error(attr: &str, item: &str) -> (String, (usize, usize)) {
        let attr = proc_macro2::TokenStream::from_str(attr).unwrap();
        let item = proc_macro2::TokenStream::from_str(item).unwrap();
        let e = expand(attr, item).expect_err("a compile error");
        let start = e.span().start();
        (e.to_string(), (start.line, start.column))
    }

    #[test_case("fn step(t: &mut Step) -> vramtest::Result<()> { Ok(()) }"; "the documented form")]
    #[test_case("fn step(t: &mut vramtest::Step) -> Result<()> { Ok(()) }"; "other paths")]
    #[test_case("pub(crate) fn step<'a>(t: &'a mut Step) -> vramtest::Result<()> { Ok(()) }"; "a lifetime")]
    fn accepts(item: &str) {
        let item = proc_macro2::TokenStream::from_str(item).unwrap();
        expand(proc_macro2::TokenStream::new(), item).unwrap();
    }

    #[test]
    fn a_sweep_lists_its_sizes_in_the_options() {
        let attr = proc_macro2::TokenStream::from_str("batch = [64, 128, 256]").unwrap();
        let item = proc_macro2::TokenStream::from_str(GOOD).unwrap();
        let out = expand(attr, item).unwrap().to_string();
        assert!(
            out.contains("batch : & [64usize , 128usize , 256usize]"),
            "{out}"
        );
    }

    #[test_case("async fn step(t: &mut Step) -> vramtest::Result<()> { Ok(()) }", "not async", (1, 0); "async")]
    #[test_case("fn step<T>(t: &mut Step) -> vramtest::Result<()> { Ok(()) }", "not generic", (1, 8); "a type parameter")]
    #[test_case("fn step<const N: usize>(t: &mut Step) -> vramtest::Result<()> { Ok(()) }", "not generic", (1, 8); "a const parameter")]
    #[test_case("fn step() -> vramtest::Result<()> { Ok(()) }", "one argument", (1, 7); "no argument")]
    #[test_case("fn step(t: &Step) -> vramtest::Result<()> { Ok(()) }", "one argument", (1, 8); "a shared reference")]
    #[test_case("fn step(t: Step) -> vramtest::Result<()> { Ok(()) }", "one argument", (1, 8); "by value")]
    #[test_case("fn step(t: &mut Step, n: usize) -> vramtest::Result<()> { Ok(()) }", "one argument", (1, 22); "two arguments")]
    #[test_case("fn step(t: &mut Step) { }", "returns `vramtest::Result<()>`", (1, 3); "no return type")]
    #[test_case("fn step(t: &mut Step) -> std::io::Result<u32> { Ok(1) }", "returns `vramtest::Result<()>`", (1, 25); "another result")]
    #[test_case("fn step(t: &mut Step) -> Result<(), String> { Ok(()) }", "returns `vramtest::Result<()>`", (1, 25); "a two-parameter result")]
    fn rejects_the_signature(item: &str, needle: &str, at: (usize, usize)) {
        let (message, span) = error("", item);
        assert!(message.contains(needle), "{message}");
        assert_eq!(span, at, "{message}");
    }

    #[test_case("iterations = 2, iterations = 3", "`iterations` is given more than once", (1, 16); "iterations")]
    #[test_case("ignore, ignore = \"slow\"", "`ignore` is given more than once", (1, 8); "ignore")]
    #[test_case("activations = \"+5%\", activations = \"+6%\"", "`activations` is given more than once", (1, 21); "a limit")]
    #[test_case("devices = \"cpu\", devices = \"cuda\"", "`devices` is given more than once", (1, 17); "devices")]
    #[test_case("iterations = 0", "at least 1", (1, 13); "zero iterations")]
    #[test_case("activation = \"+5%\"", "unknown or malformed option", (1, 0); "a misspelt category")]
    #[test_case("batch = 64", "a list of two or more batch sizes", (1, 8); "a single batch size")]
    #[test_case("batch = [64]", "a list of two or more batch sizes", (1, 8); "a one-element sweep")]
    #[test_case("batch = [0, 64]", "at least 1", (1, 9); "batch zero")]
    #[test_case("batch = [64, 64]", "given twice", (1, 13); "a repeated size")]
    #[test_case("batch = [64, \"x\"]", "a list of two or more batch sizes", (1, 13); "not a number")]
    fn rejects_the_options(attr: &str, needle: &str, at: (usize, usize)) {
        let (message, span) = error(attr, GOOD);
        assert!(message.contains(needle), "{message}");
        assert_eq!(span, at, "{message}");
    }
}
