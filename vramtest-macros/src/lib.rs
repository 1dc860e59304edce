//! `#[vramtest]`: registers a training-step function with the vramtest harness.
//!
//! Options are checked at compile time, with the same parsers the harness uses, so a
//! typo in a limit is a compile error at the attribute, not a surprise in CI.
//!
//! Use it through `vramtest`, which re-exports it (`use vramtest::vramtest;`). Every
//! option is described in the book, <https://cargo-vramtest.github.io/cargo-vramtest/> ("Attribute options, limits and
//! budgets").

#![deny(missing_docs)]

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
/// - `ignore` or `ignore = "reason"`: skipped unless asked for: `cargo vramtest
///   --run-ignored only` (or `all`), `cargo test --test vram -- --include-ignored`;
/// - `tolerance = "+2% | 1MiB"`: the allowed growth of the peak and every category but
///   `untracked` (which keeps its wider default unless named);
/// - `peak = ".."`, `reserved = ".."` (a CUDA pool's reserved peak), `leak = ".."`, or a
///   category (`activations = "+5%"`): one limit;
/// - `budget = "22GiB"`: the peak must stay under this, whatever the snapshot says;
/// - `axial_budget = "8GiB"` (with `target`): the most each axial point (the target's
///   value of one axis, every other axis at its smallest) may be predicted to need;
///   `"0"` measures none; without it (nor the metadata's `axial_budget`) the points'
///   predicted peaks share 10% of the grid's measured peaks, each at most half the
///   memory of what measures them (the device's on a GPU, else the host's) and within
///   `budget`;
/// - `devices = "cpu"` or `"cpu, cuda"`: where the test can run (default: both);
/// - `batch = [64, 128, 256]`: a batch sweep (two or more sizes): the test runs once per
///   size, `t.batch()` says which, and every category is fitted as fixed plus
///   per-sample bytes;
/// - `axes(batch = [2, 4], seq = [16, 32, 48], layers = [1, 2, 3])`: a sweep over
///   named axes: every combination runs in a process of its own (in parallel up to
///   `-j`), `t.axis("seq")` says which, and every figure is fitted as a sparse sum of
///   monomials of the axes (at most 256 points);
/// - an axis of string literals in `axes(..)` (`precision = ["f32", "bf16"]`) is
///   categorical (a lever): every combination of levels runs the numeric grid (the 256
///   points count them all), `t.variant("precision")` says which, each combination is
///   fitted and gated on its own, and the first level of each axis is the baseline; at
///   least one numeric axis is needed to fit on;
/// - `target(layers = 32, seq = 4096, batch = 8)` (with `axes`): the configuration the
///   sweep predicts, kept in the snapshot and gated like the measured figures (and
///   against `budget`); it may name a level (`precision = "bf16"`), else every
///   combination of levels is predicted;
/// - `threads = 4`: the CPU threads of the measured process (default 2, whatever the
///   environment says), and `cpu_only = ".."`: a limit on CPU-only memory (not
///   compared without one).
#[proc_macro_attribute]
pub fn vramtest(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item: proc_macro2::TokenStream = item.into();
    match expand(attr.into(), item.clone()) {
        Ok(ts) => ts.into(),
        Err(e) => with_function(e, item).into(),
    }
}

/// The error, followed by the function as written when it parses as one (allowed to go
/// unused): its imports stay used and its body is still checked, so the error is the
/// only diagnostic, not joined by an `unused import` of `Step` or errors of the body.
fn with_function(e: syn::Error, item: proc_macro2::TokenStream) -> proc_macro2::TokenStream {
    let error = e.to_compile_error();
    match syn::parse2::<ItemFn>(item) {
        Ok(func) => quote! {
            #error
            #[allow(dead_code)]
            #func
        },
        Err(_) => error,
    }
}

/// The function, unchanged, and its registration with the harness.
fn expand(
    attr: proc_macro2::TokenStream,
    item: proc_macro2::TokenStream,
) -> syn::Result<proc_macro2::TokenStream> {
    let func: ItemFn = syn::parse2(item)?;
    check_signature(&func.sig)?;
    let options = OptionTokens::parse(attr)?;
    Ok(registration(&func, &options))
}

/// The options of one attribute, as the tokens of the harness's `Options` fields.
struct OptionTokens {
    iterations: proc_macro2::TokenStream,
    threads: proc_macro2::TokenStream,
    ignore: proc_macro2::TokenStream,
    budget: proc_macro2::TokenStream,
    /// `axial_budget = "8GiB"`, with its span to blame without a target.
    axial_budget: Option<(u64, proc_macro2::Span)>,
    limits: Vec<proc_macro2::TokenStream>,
    devices: Vec<String>,
    batch: Vec<usize>,
    /// `axes(name = [..], ..)`: each numeric axis with its values, in the attribute's
    /// order.
    axes: Vec<(String, Vec<usize>)>,
    /// `axes(name = ["..", ..], ..)`: each categorical axis with its levels, the
    /// baseline first, in the attribute's order.
    levels: Vec<(String, Vec<String>)>,
    /// `target(name = N, name = "level", ..)`, with the span to blame when it does not
    /// match the axes.
    target: Option<(Vec<(String, TargetValue)>, proc_macro2::Span)>,
}

/// A value of `target(..)`: a number for a numeric axis, a level for a categorical one.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TargetValue {
    Number(usize),
    Level(String),
}

impl OptionTokens {
    /// Parses and checks the attribute's options; each may be given at most once.
    fn parse(attr: proc_macro2::TokenStream) -> syn::Result<OptionTokens> {
        let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(attr)?;
        let mut options = OptionTokens {
            iterations: quote!(::core::option::Option::None),
            threads: quote!(::core::option::Option::None),
            ignore: quote!(::core::option::Option::None),
            budget: quote!(::core::option::Option::None),
            axial_budget: None,
            limits: Vec::new(),
            devices: Vec::new(),
            batch: Vec::new(),
            axes: Vec::new(),
            levels: Vec::new(),
            target: None,
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
        options.check_axes()?;
        Ok(options)
    }

    /// The axes and the target together: a grid the model can fit, and a target that
    /// gives every axis a value. `batch = [..]` beside `axes(..)` is an error.
    fn check_axes(&self) -> syn::Result<()> {
        let span = proc_macro2::Span::call_site();
        if !self.axes.is_empty() && !self.batch.is_empty() {
            return Err(syn::Error::new(
                span,
                "`batch = [..]` and `axes(..)` are both given (hint: put the batch sizes in the axes: `axes(batch = [..], ..)`)",
            ));
        }
        let Some((target, target_span)) = &self.target else {
            return match self.axial_budget {
                Some((_, span)) => Err(syn::Error::new(
                    span,
                    "`axial_budget` bounds the points measured toward a target, and there is none (hint: add `target(name = N, ..)`, or remove `axial_budget`)",
                )),
                None => Ok(()),
            };
        };
        if self.axes.is_empty() {
            return Err(syn::Error::new(
                *target_span,
                "`target(..)` needs a sweep over named axes to predict it from (hint: add `axes(name = [..], ..)`)",
            ));
        }
        for (name, value) in target {
            self.check_target_value(name, value, *target_span)?;
        }
        for (name, _) in &self.axes {
            if !target.iter().any(|(k, _)| k == name) {
                return Err(syn::Error::new(
                    *target_span,
                    format!(
                        "`target` gives no value for axis `{name}` (hint: `target({name} = N, ..)`; declared: {})",
                        self.declared()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Every axis name, numeric and categorical, comma-separated.
    fn declared(&self) -> String {
        self.axes
            .iter()
            .map(|(k, _)| k.as_str())
            .chain(self.levels.iter().map(|(k, _)| k.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// One value of `target(..)`: a number for a declared numeric axis, a declared level
    /// for a categorical one.
    fn check_target_value(
        &self,
        name: &str,
        value: &TargetValue,
        span: proc_macro2::Span,
    ) -> syn::Result<()> {
        let numeric = self.axes.iter().any(|(k, _)| k == name);
        let levels = self.levels.iter().find(|(k, _)| k == name).map(|(_, l)| l);
        let message = match (value, numeric, levels) {
            (_, false, None) => format!(
                "`target` names axis `{name}`, which `axes(..)` does not declare (declared: {})",
                self.declared()
            ),
            (TargetValue::Number(_), true, _) => return Ok(()),
            (TargetValue::Level(_), true, _) => {
                format!("`{name}` takes an integer, like `{name} = 5`")
            }
            (TargetValue::Number(n), false, Some(levels)) => format!(
                "`target` gives the categorical axis `{name}` the number {n}; it takes one of its levels ({})",
                quoted(levels)
            ),
            (TargetValue::Level(level), false, Some(levels)) => {
                if levels.contains(level) {
                    return Ok(());
                }
                format!(
                    "`target` gives axis `{name}` the level \"{level}\", which it does not declare (its levels: {})",
                    quoted(levels)
                )
            }
        };
        Err(syn::Error::new(span, message))
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
            (Meta::NameValue(nv), "axial_budget") => {
                let text = string(&nv.value)?;
                let bytes = vramtest_model::parse_bytes(&text)
                    .map_err(|e| syn::Error::new_spanned(&nv.value, e))?;
                self.axial_budget = Some((bytes, syn::spanned::Spanned::span(&nv.value)));
            }
            (Meta::NameValue(nv), "devices") => self.devices.extend(devices(&nv.value)?),
            (Meta::NameValue(nv), "batch") => self.batch = batch_sizes(&nv.value)?,
            (Meta::List(list), "axes") => (self.axes, self.levels) = axes(list)?,
            (Meta::List(list), "target") => {
                self.target = Some((target(list)?, list.delimiter.span().join()));
            }
            // A limit: the names the metadata's `limits` take, from the one list.
            // Read here, by the parser the settings use, and handed to the harness typed.
            (Meta::NameValue(nv), k) if k.parse::<vramtest_model::LimitKey>().is_ok() => {
                let key = k
                    .parse::<vramtest_model::LimitKey>()
                    .expect("the guard read the key");
                let limit = string(&nv.value)?
                    .parse::<vramtest_model::Limit>()
                    .map_err(|e| syn::Error::new_spanned(&nv.value, e))?;
                self.limits.push(limit_tokens(key, limit));
            }
            _ => {
                return Err(syn::Error::new_spanned(
                    meta,
                    format!(
                        "unknown or malformed option `{key}` (expected iterations = N, threads = N, ignore, ignore = \"reason\", tolerance = \"+2% | 1MiB\", peak/reserved/leak/<category> = \"..\", budget = \"22GiB\", axial_budget = \"8GiB\", devices = \"cpu, cuda\", batch = [64, 128], axes(seq = [16, 32, 48], precision = [\"f32\", \"bf16\"], ..), target(seq = 4096, ..))"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// A limit as the harness's `Options` hold it: `(LimitKey, Limit)`, both constants, so
/// the harness reads no limit text again.
fn limit_tokens(
    key: vramtest_model::LimitKey,
    limit: vramtest_model::Limit,
) -> proc_macro2::TokenStream {
    use vramtest_model::LimitKey;
    let private = quote!(::vramtest::__private);
    // The variants' own names, as `Debug` writes them (`Category(Activations)`).
    let key = match key {
        LimitKey::Category(c) => {
            let variant = quote::format_ident!("{c:?}");
            quote!(#private::LimitKey::Category(#private::Category::#variant))
        }
        other => {
            let variant = quote::format_ident!("{other:?}");
            quote!(#private::LimitKey::#variant)
        }
    };
    let limit = if limit.is_allow() {
        quote!(#private::Limit::ALLOW)
    } else {
        let percent = proc_macro2::Literal::f64_suffixed(limit.percent);
        let bytes = proc_macro2::Literal::u64_suffixed(limit.bytes);
        quote!(#private::Limit { percent: #percent, bytes: #bytes })
    };
    quote!((#key, #limit))
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
fn registration(func: &ItemFn, options: &OptionTokens) -> proc_macro2::TokenStream {
    let OptionTokens {
        iterations,
        threads,
        ignore,
        budget,
        axial_budget,
        limits,
        devices,
        batch,
        axes,
        levels,
        target,
    } = options;
    let axial_budget = match axial_budget {
        Some((bytes, _)) => quote!(::core::option::Option::Some(#bytes)),
        None => quote!(::core::option::Option::None),
    };
    let axes = axes.iter().map(|(k, v)| quote!((#k, &[#(#v),*])));
    let levels = levels.iter().map(|(k, v)| quote!((#k, &[#(#v),*])));
    let target_values = target.iter().flat_map(|(t, _)| t.iter());
    let target_levels = target_values.clone().filter_map(|(k, v)| match v {
        TargetValue::Level(level) => Some(quote!((#k, #level))),
        TargetValue::Number(_) => None,
    });
    let target = target_values.filter_map(|(k, v)| match v {
        TargetValue::Number(n) => Some(quote!((#k, #n))),
        TargetValue::Level(_) => None,
    });
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
                    axial_budget: #axial_budget,
                    devices: &[#(#devices),*],
                    batch: &[#(#batch),*],
                    threads: #threads,
                    axes: &[#(#axes),*],
                    levels: &[#(#levels),*],
                    target: &[#(#target),*],
                    target_levels: &[#(#target_levels),*],
                },
            }
        }
    }
}

/// The numeric and the categorical axes of `axes(..)`, each in the attribute's order.
type Axes = (Vec<(String, Vec<usize>)>, Vec<(String, Vec<String>)>);

/// `axes(batch = [2, 4], seq = [16, 32, 48], precision = ["f32", "bf16"])`: named axes,
/// each a list of distinct positive integers (a numeric axis) or of distinct string
/// literals (a categorical axis, its first level the baseline), checked with the
/// model's own rules (enough values for a fit, at most 256 points counting every
/// combination of levels), so a bad grid is a compile error naming the axis.
fn axes(list: &syn::MetaList) -> syn::Result<Axes> {
    const HINT: &str = "`axes` takes named lists of integers or of strings, like `axes(batch = [2, 4], seq = [16, 32, 48], precision = [\"f32\", \"bf16\"])`";
    let mut numeric: Vec<(String, Vec<usize>)> = Vec::new();
    let mut levels: Vec<(String, Vec<String>)> = Vec::new();
    for (name, nv) in named_values(list, HINT)? {
        let Expr::Array(array) = &nv.value else {
            return Err(syn::Error::new_spanned(
                &nv.value,
                format!(
                    "axis `{name}`: expected a list of integers, like `{name} = [1, 2, 3]`, or of levels, like `{name} = [\"off\", \"on\"]`"
                ),
            ));
        };
        if numeric.iter().any(|(k, _)| *k == name) || levels.iter().any(|(k, _)| *k == name) {
            return Err(syn::Error::new_spanned(
                &nv.path,
                format!("axis `{name}` is declared twice"),
            ));
        }
        match axis_values(&name, array)? {
            AxisValues::Numeric(values) => numeric.push((name, values)),
            AxisValues::Levels(values) => levels.push((name, values)),
        }
    }
    check_grid(&numeric, &levels, &list.tokens)?;
    Ok((numeric, levels))
}

/// The values of one axis.
enum AxisValues {
    Numeric(Vec<usize>),
    Levels(Vec<String>),
}

/// `[16, 32, 48]` or `["f32", "bf16"]`: integers or string literals, not both. The
/// first value decides the kind (an empty list is numeric, and refused as such).
fn axis_values(name: &str, array: &syn::ExprArray) -> syn::Result<AxisValues> {
    let categorical = matches!(
        array.elems.first(),
        Some(Expr::Lit(ExprLit {
            lit: Lit::Str(_),
            ..
        }))
    );
    let mixed = |elem: &Expr| {
        syn::Error::new_spanned(
            elem,
            format!(
                "axis `{name}` mixes strings and integers (hint: a numeric axis lists integers, a categorical axis string levels)"
            ),
        )
    };
    let mut numbers = Vec::new();
    let mut strings = Vec::new();
    for elem in &array.elems {
        match (elem, categorical) {
            (
                Expr::Lit(ExprLit {
                    lit: Lit::Str(s), ..
                }),
                true,
            ) => strings.push(s.value()),
            (
                Expr::Lit(ExprLit {
                    lit: Lit::Int(i), ..
                }),
                false,
            ) => numbers.push(i.base10_parse::<usize>()?),
            (
                Expr::Lit(ExprLit {
                    lit: Lit::Str(_) | Lit::Int(_),
                    ..
                }),
                _,
            ) => return Err(mixed(elem)),
            (other, _) => {
                return Err(syn::Error::new_spanned(
                    other,
                    format!(
                        "axis `{name}`: `{}` is not an integer or a string literal",
                        quote!(#other)
                    ),
                ));
            }
        }
    }
    Ok(if categorical {
        AxisValues::Levels(strings)
    } else {
        AxisValues::Numeric(numbers)
    })
}

/// The whole grid: the numeric axes by the model's rules, the categorical ones by the
/// lever table's, at least one numeric axis to fit each combination of levels on, and
/// at most [`vramtest_model::axes::MAX_POINTS`] points in all.
fn check_grid(
    numeric: &[(String, Vec<usize>)],
    levels: &[(String, Vec<String>)],
    at: &impl quote::ToTokens,
) -> syn::Result<()> {
    let error = |message: String| syn::Error::new_spanned(at, message);
    let levers = vramtest_model::levers::LeverAxes::new(levels.iter().cloned().collect())
        .map_err(|e| error(e.to_string()))?;
    if numeric.is_empty() && !levels.is_empty() {
        return Err(error(format!(
            "`axes(..)` declares only categorical axes ({}); each combination of levels is fitted over the numeric axes, so add at least one (hint: `batch = [2, 4]`)",
            levels
                .iter()
                .map(|(k, _)| k.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let grid = vramtest_model::axes::Grid::new(
        numeric
            .iter()
            .map(|(k, v)| (k.clone(), v.iter().map(|&n| n as u64).collect::<Vec<_>>())),
    )
    .map_err(|e| error(e.to_string()))?;
    let combinations = levers.combinations().len() as u128;
    let points = grid.points().len() as u128 * combinations;
    if points > u128::from(vramtest_model::axes::MAX_POINTS) {
        return Err(error(format!(
            "the grid has {points} points ({} numeric × {combinations} combinations of levels); at most {} are allowed",
            grid.points().len(),
            vramtest_model::axes::MAX_POINTS
        )));
    }
    Ok(())
}

/// `"f32", "bf16"`.
fn quoted(levels: &[String]) -> String {
    levels
        .iter()
        .map(|l| format!("\"{l}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `name = value` pairs inside `axes(..)` or `target(..)`, each name an identifier;
/// anything else is an error with `hint`.
fn named_values(
    list: &syn::MetaList,
    hint: &str,
) -> syn::Result<Vec<(String, syn::MetaNameValue)>> {
    let metas = list.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)?;
    metas
        .into_iter()
        .map(|meta| {
            let Meta::NameValue(nv) = meta else {
                return Err(syn::Error::new_spanned(meta, hint));
            };
            let name = nv
                .path
                .get_ident()
                .map(|i| i.to_string())
                .ok_or_else(|| syn::Error::new_spanned(&nv.path, hint))?;
            Ok((name, nv))
        })
        .collect()
}

/// `target(layers = 32, seq = 4096, precision = "bf16")`: a positive integer per
/// numeric axis, a level (a string literal) for any categorical one.
fn target(list: &syn::MetaList) -> syn::Result<Vec<(String, TargetValue)>> {
    const HINT: &str = "`target` takes a value per axis, like `target(layers = 32, seq = 4096)`";
    let mut target: Vec<(String, TargetValue)> = Vec::new();
    for (name, nv) in named_values(list, HINT)? {
        let value = match &nv.value {
            Expr::Lit(ExprLit {
                lit: Lit::Str(s), ..
            }) => TargetValue::Level(s.value()),
            other => TargetValue::Number(positive(other, &name)? as usize),
        };
        if target.iter().any(|(k, _)| *k == name) {
            return Err(syn::Error::new_spanned(
                &nv.path,
                format!("`target` gives axis `{name}` twice"),
            ));
        }
        target.push((name, value));
    }
    Ok(target)
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
        let (func, def) = expansion("", item);
        // The function comes out as written.
        let written: ItemFn = syn::parse_str(item).unwrap();
        assert_eq!(quote!(#func).to_string(), quote!(#written).to_string());
        // Registered under its name, calling it, from this file and line.
        assert_eq!(text(&field(&def, "name")), "\"step\"");
        assert_eq!(text(&field(&def, "func")), "step");
        assert_eq!(text(&field(&def, "file")), ":: core :: file ! ()");
        assert_eq!(text(&field(&def, "line")), ":: core :: line ! ()");
        // Every option of the harness's `Options`, each at its default.
        assert_eq!(
            options(&def),
            [
                ("iterations", NONE.to_owned()),
                ("ignore", NONE.to_owned()),
                ("limits", "& []".to_owned()),
                ("budget", NONE.to_owned()),
                ("axial_budget", NONE.to_owned()),
                ("devices", "& []".to_owned()),
                ("batch", "& []".to_owned()),
                ("threads", NONE.to_owned()),
                ("axes", "& []".to_owned()),
                ("levels", "& []".to_owned()),
                ("target", "& []".to_owned()),
                ("target_levels", "& []".to_owned()),
            ]
        );
    }

    /// `Option::None` as the expansion writes it.
    const NONE: &str = ":: core :: option :: Option :: None";

    /// Expands `#[vramtest(attr)] item` and parses the output back: the function, and
    /// the `TestDef` literal submitted to the harness's inventory (the only other item).
    fn expansion(attr: &str, item: &str) -> (ItemFn, syn::ExprStruct) {
        let attr = proc_macro2::TokenStream::from_str(attr).unwrap();
        let item = proc_macro2::TokenStream::from_str(item).unwrap();
        let out = expand(attr, item).unwrap();
        let file: syn::File = syn::parse2(out.clone()).unwrap();
        assert_eq!(
            file.items.len(),
            2,
            "the function and its registration: {out}"
        );
        let syn::Item::Fn(func) = &file.items[0] else {
            panic!("the function first: {out}")
        };
        let syn::Item::Macro(submit) = &file.items[1] else {
            panic!("the registration second: {out}")
        };
        assert_eq!(
            text(&submit.mac.path),
            ":: vramtest :: __private :: inventory :: submit"
        );
        let def: syn::ExprStruct = submit.mac.parse_body().unwrap();
        assert_eq!(text(&def.path), ":: vramtest :: __private :: TestDef");
        (func.clone(), def)
    }

    /// The value of the field `name` of a struct literal (exactly one such field).
    fn field(literal: &syn::ExprStruct, name: &str) -> Expr {
        let mut found = literal
            .fields
            .iter()
            .filter(|f| matches!(&f.member, syn::Member::Named(ident) if ident == name));
        let value = found.next().unwrap_or_else(|| panic!("no field `{name}`"));
        assert!(found.next().is_none(), "field `{name}` twice");
        value.expr.clone()
    }

    /// The `options` of a registration: every field, in order, as token text.
    fn options(def: &syn::ExprStruct) -> Vec<(&'static str, String)> {
        let Expr::Struct(options) = field(def, "options") else {
            panic!("`options` is a struct literal")
        };
        assert_eq!(text(&options.path), ":: vramtest :: __private :: Options");
        options
            .fields
            .iter()
            .map(|f| {
                let syn::Member::Named(ident) = &f.member else {
                    panic!("a named field")
                };
                let name = [
                    "iterations",
                    "ignore",
                    "limits",
                    "budget",
                    "axial_budget",
                    "devices",
                    "batch",
                    "threads",
                    "axes",
                    "levels",
                    "target",
                    "target_levels",
                ]
                .into_iter()
                .find(|n| ident == n)
                .unwrap_or_else(|| panic!("unknown option field `{ident}`"));
                (name, text(&f.expr))
            })
            .collect()
    }

    fn text(tokens: &impl quote::ToTokens) -> String {
        tokens.to_token_stream().to_string()
    }

    #[test]
    fn the_options_reach_the_registration() {
        let (_, def) = expansion(
            "iterations = 5, ignore = \"slow\", activations = \"+5%\", peak = \"1MiB\", \
             budget = \"1KiB\", devices = \"cpu, cuda\", threads = 4",
            GOOD,
        );
        assert_eq!(
            options(&def),
            [
                (
                    "iterations",
                    ":: core :: option :: Option :: Some (5u32)".to_owned()
                ),
                (
                    "ignore",
                    ":: core :: option :: Option :: Some (\"slow\")".to_owned()
                ),
                (
                    "limits",
                    "& [(:: vramtest :: __private :: LimitKey :: Category (:: vramtest :: __private :: Category :: Activations) , :: vramtest :: __private :: Limit { percent : 5f64 , bytes : 0u64 }) , (:: vramtest :: __private :: LimitKey :: Peak , :: vramtest :: __private :: Limit { percent : 0f64 , bytes : 1048576u64 })]".to_owned()
                ),
                (
                    "budget",
                    ":: core :: option :: Option :: Some (1024u64)".to_owned()
                ),
                ("axial_budget", NONE.to_owned()),
                ("devices", "& [\"cpu\" , \"cuda\"]".to_owned()),
                ("batch", "& []".to_owned()),
                (
                    "threads",
                    ":: core :: option :: Option :: Some (4u32)".to_owned()
                ),
                ("axes", "& []".to_owned()),
                ("levels", "& []".to_owned()),
                ("target", "& []".to_owned()),
                ("target_levels", "& []".to_owned()),
            ]
        );
    }

    /// Every limit key reaches the harness as its own variant, and `allow` as the
    /// constant (its percentage has no literal).
    #[test]
    fn every_limit_key_is_a_constant_of_its_own() {
        let private = ":: vramtest :: __private ::";
        for key in vramtest_model::LimitKey::ALL {
            let (_, def) = expansion(&format!("{key} = \"allow\""), GOOD);
            let limits = options(&def)
                .into_iter()
                .find(|(name, _)| *name == "limits")
                .unwrap()
                .1;
            let variant = match key {
                vramtest_model::LimitKey::Category(c) => {
                    format!("{private} LimitKey :: Category ({private} Category :: {c:?})")
                }
                other => format!("{private} LimitKey :: {other:?}"),
            };
            assert_eq!(
                limits,
                format!("& [({variant} , {private} Limit :: ALLOW)]")
            );
        }
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

    #[test]
    fn axes_and_a_target_list_their_values_in_the_options() {
        let attr = proc_macro2::TokenStream::from_str(
            "axes(batch = [2, 4], seq = [16, 32, 48]), target(seq = 4096, batch = 8)",
        )
        .unwrap();
        let item = proc_macro2::TokenStream::from_str(GOOD).unwrap();
        let out = expand(attr, item).unwrap().to_string();
        assert!(
            out.contains(
                "axes : & [(\"batch\" , & [2usize , 4usize]) , (\"seq\" , & [16usize , 32usize , 48usize])]"
            ),
            "{out}"
        );
        assert!(
            out.contains("target : & [(\"seq\" , 4096usize) , (\"batch\" , 8usize)]"),
            "{out}"
        );
        assert!(out.contains("batch : & []"), "{out}");
    }

    #[test]
    fn categorical_axes_and_target_levels_reach_the_options() {
        let (_, def) = expansion(
            "axes(seq = [16, 32], precision = [\"f32\", \"bf16\"], checkpointing = [\"off\", \"blocks\"]), \
             target(seq = 4096, precision = \"bf16\")",
            GOOD,
        );
        let options = options(&def);
        let get = |name: &str| {
            options
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.clone())
                .unwrap()
        };
        assert_eq!(get("axes"), "& [(\"seq\" , & [16usize , 32usize])]");
        assert_eq!(
            get("levels"),
            "& [(\"precision\" , & [\"f32\" , \"bf16\"]) , (\"checkpointing\" , & [\"off\" , \"blocks\"])]"
        );
        assert_eq!(get("target"), "& [(\"seq\" , 4096usize)]");
        assert_eq!(get("target_levels"), "& [(\"precision\" , \"bf16\")]");
    }

    #[test_case("\"8GiB\"", "Some (8589934592u64)"; "a size")]
    #[test_case("\"0\"", "Some (0u64)"; "none measured")]
    fn the_axial_budget_reaches_the_options(value: &str, expected: &str) {
        let attr = format!("axes(seq = [16, 32]), target(seq = 4096), axial_budget = {value}");
        let (_, def) = expansion(&attr, GOOD);
        let got = options(&def)
            .into_iter()
            .find(|(n, _)| *n == "axial_budget")
            .unwrap()
            .1;
        assert_eq!(got, format!(":: core :: option :: Option :: {expected}"));
    }

    #[test_case("axes(seq = [16])", "`seq` has 1 distinct value"; "one value")]
    #[test_case("axes(seq = [])", "axis `seq` has no values"; "an empty list")]
    #[test_case("axes(seq = [16, 16, 32])", "lists 16 twice"; "a repeated value")]
    #[test_case("axes(seq = [0, 16, 32])", "the value 0"; "zero")]
    #[test_case("axes(seq = [16, 2.5, 32])", "axis `seq`: `2.5` is not an integer"; "a float")]
    #[test_case("axes(seq = 16)", "axis `seq`: expected a list of integers"; "not a list")]
    #[test_case("axes(a = [1, 2, 3, 4], b = [1, 2, 3, 4], c = [1, 2, 3, 4], d = [1, 2, 3, 4, 5])", "320 points; at most 256"; "too many points")]
    #[test_case("axes(seq = [16, 32, 48]), batch = [2, 4]", "both given"; "batch beside axes")]
    #[test_case("target(seq = 4096)", "needs a sweep over named axes"; "a target without axes")]
    #[test_case("axes(seq = [16, 32]), axial_budget = \"1GiB\"", "`axial_budget` bounds the points measured toward a target, and there is none"; "an axial budget without a target")]
    #[test_case("axes(seq = [16, 32]), target(seq = 64), axial_budget = \"lots\"", "hint:"; "an axial budget that is no size")]
    #[test_case("axes(seq = [16, 32, 48]), target(sq = 4096)", "axis `sq`, which `axes(..)` does not declare (declared: seq)"; "an unknown target axis")]
    #[test_case("axes(seq = [16, 32, 48], layers = [1, 2]), target(seq = 4096)", "no value for axis `layers`"; "a missing target axis")]
    #[test_case("axes(seq = [16, 32, 48]), target(seq = 0)", "at least 1"; "a target at zero")]
    #[test_case("axes(seq = [16, 32, 48]), target(seq = \"big\")", "`seq` takes an integer"; "a target that is not a number")]
    #[test_case("axes(seq = [16, 32], precision = [])", "axis `precision` has no values"; "an empty categorical list")]
    #[test_case("axes(seq = [16, 32], precision = [\"f32\", \"bf16\", \"f32\"])", "categorical axis `precision` lists `f32` twice"; "a repeated level")]
    #[test_case("axes(seq = [16, 32], precision = [\"f32\", 16])", "axis `precision` mixes strings and integers"; "an integer among levels")]
    #[test_case("axes(seq = [16, \"32\"])", "axis `seq` mixes strings and integers"; "a string among integers")]
    #[test_case("axes(seq = [16, 32], seq = [\"a\", \"b\"])", "axis `seq` is declared twice"; "a numeric and a categorical axis of one name")]
    #[test_case("axes(precision = [\"f32\", \"bf16\"])", "declares only categorical axes (precision)"; "no numeric axis")]
    #[test_case("axes(a = [1, 2, 3, 4], b = [1, 2, 3, 4], c = [1, 2, 3, 4], p = [\"x\", \"y\"], q = [\"u\", \"v\", \"w\"])", "384 points (64 numeric × 6 combinations of levels); at most 256"; "too many points with the levels")]
    #[test_case("axes(seq = [16, 32], precision = [\"f32\", \"bf16\"]), target(seq = 64, precision = \"fp8\")", "axis `precision` the level \"fp8\", which it does not declare (its levels: \"f32\", \"bf16\")"; "an undeclared target level")]
    #[test_case("axes(seq = [16, 32], precision = [\"f32\", \"bf16\"]), target(seq = 64, precision = 2)", "categorical axis `precision` the number 2"; "a number for a categorical target")]
    #[test_case("axes(seq = [16, 32], precision = [\"f32\", \"bf16\"]), target(seq = 64, dtype = \"f32\")", "axis `dtype`, which `axes(..)` does not declare (declared: seq, precision)"; "an unknown categorical target axis")]
    fn rejects_the_axes(attr: &str, needle: &str) {
        let (message, _) = error(attr, GOOD);
        assert!(message.contains(needle), "{message}");
    }
}
