//! Each way of naming another module, in a tiny crate whose only cycle goes through
//! it: the check must report that cycle (and none once the naming is gone). The first
//! patterns are those the former script missed.

mod common;

use common::{cycles, findings, relative, tree};
use test_case::test_case;

fn pair(a: &str, b: &str) -> Vec<Vec<String>> {
    let mut files = vec![a.to_string(), b.to_string()];
    files.sort();
    vec![files]
}

/// `b.rs` uses `a.rs` back through `crate::a::back`, so any use of `b` from `a` closes
/// a cycle.
const B_USES_A: &str = "pub fn g() {}\npub fn h() { crate::a::back() }\n";

#[test_case("pub fn back() {}\npub fn f() { b::g() }\nmod b;\n"; "a child module's name")]
#[test_case("pub fn back() {}\nmod b;\npub fn f() { let _ = b::g; }\n"; "a child's function as a value")]
fn a_path_that_starts_with_a_child_module_name_is_an_edge(a: &str) {
    // `a/b.rs` is the child of `a.rs`; it uses its parent through `super`.
    let dir = tree(&[
        ("lib.rs", "mod a;\n"),
        ("a.rs", a),
        ("a/b.rs", "pub fn g() { super::back() }\n"),
    ]);
    assert_eq!(cycles(dir.path()), pair("a.rs", "a/b.rs"));
}

#[test]
fn a_path_through_a_grandchild_is_an_edge_to_the_grandchild() {
    // `output::html::render`: the edge goes to html.rs, not to output/mod.rs.
    let dir = tree(&[
        (
            "lib.rs",
            "mod output;\npub fn helper() {}\npub fn run() { output::html::render() }\n",
        ),
        ("output/mod.rs", "pub mod html;\n"),
        ("output/html.rs", "pub fn render() { crate::helper() }\n"),
    ]);
    assert_eq!(cycles(dir.path()), pair("lib.rs", "output/html.rs"));
}

#[test]
fn a_path_that_starts_with_an_imported_module_name_is_an_edge() {
    let dir = tree(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        (
            "a.rs",
            "use crate::b;\npub fn back() {}\npub fn f() { b::c::g() }\n",
        ),
        ("b/mod.rs", "pub mod c;\n"),
        ("b/c.rs", "pub fn g() { crate::a::back() }\n"),
    ]);
    assert_eq!(cycles(dir.path()), pair("a.rs", "b/c.rs"));
}

#[test]
fn code_after_a_test_module_is_read() {
    let a = "pub fn back() {}\n\
             #[cfg(test)]\nmod tests {\n    #[test]\n    fn t() {}\n}\n\
             pub fn after() { crate::b::g() }\n";
    let dir = tree(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", a),
        ("b.rs", B_USES_A),
    ]);
    assert_eq!(cycles(dir.path()), pair("a.rs", "b.rs"));
    let found = findings(dir.path());
    let from_a = found.cycles[0]
        .edges
        .iter()
        .find(|e| relative(dir.path(), &e.from) == "a.rs")
        .expect("an edge from a.rs");
    assert_eq!((from_a.line, from_a.path.as_str()), (7, "crate::b::g"));
}

#[test]
fn a_use_after_a_test_module_is_read() {
    let a = "pub fn back() {}\n#[cfg(test)]\nmod tests {}\nuse crate::b::g;\n";
    let dir = tree(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", a),
        ("b.rs", B_USES_A),
    ]);
    assert_eq!(cycles(dir.path()), pair("a.rs", "b.rs"));
}

#[test_case("use crate::{b as bb};\npub fn f() { bb::g() }\n"; "a module renamed in a group")]
#[test_case("use crate::{b::{g as gg}};\npub fn f() { gg() }\n"; "a function renamed in a nested group")]
#[test_case("use crate::b as bb;\npub fn f() { bb::g() }\n"; "a module renamed alone")]
#[test_case("use crate::{b::{self as bb}};\npub fn f() { bb::g() }\n"; "self renamed in a group")]
fn a_rename_is_followed(a_head: &str) {
    let a = format!("{a_head}pub fn back() {{}}\n");
    let dir = tree(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", &a),
        ("b.rs", B_USES_A),
    ]);
    assert_eq!(cycles(dir.path()), pair("a.rs", "b.rs"));
}

#[test]
fn super_inside_an_inline_module_is_the_inline_modules_parent() {
    // Inside `a::inner`, `super::b` is `a::b` (a/b.rs), not `crate::b`.
    let a = "mod b;\npub fn back() {}\nmod inner {\n    pub fn f() { super::b::g() }\n}\n";
    let dir = tree(&[
        ("lib.rs", "mod a;\n"),
        ("a.rs", a),
        ("a/b.rs", "pub fn g() { super::back() }\n"),
    ]);
    assert_eq!(cycles(dir.path()), pair("a.rs", "a/b.rs"));
}

#[test]
fn self_inside_an_inline_module_is_the_inline_module() {
    // Inside `a::inner`, `self::deep` is `a::inner::deep` (a/inner/deep.rs).
    let a = "pub fn back() {}\nmod inner {\n    mod deep;\n    pub fn f() { self::deep::g() }\n}\n";
    let dir = tree(&[
        ("lib.rs", "mod a;\n"),
        ("a.rs", a),
        ("a/inner/deep.rs", "pub fn g() { crate::a::back() }\n"),
    ]);
    assert_eq!(cycles(dir.path()), pair("a.rs", "a/inner/deep.rs"));
}

#[test_case("pub use b::g;\n"; "a pub use")]
#[test_case("pub use b::{g as g};\n"; "a pub use in a group")]
#[test_case("pub use b::*;\n"; "a glob pub use")]
#[test_case("pub use reexports::*;\nmod reexports { pub use crate::b::g; }\n"; "a glob of an inline module's pub use")]
fn a_re_export_is_followed_to_the_defining_module(lib_tail: &str) {
    // `crate::g` is defined in b.rs: a.rs uses b.rs, not lib.rs.
    let lib = format!("mod a;\nmod b;\n{lib_tail}");
    let dir = tree(&[
        ("lib.rs", &lib),
        ("a.rs", "pub fn back() {}\npub fn f() { crate::g() }\n"),
        ("b.rs", B_USES_A),
    ]);
    assert_eq!(cycles(dir.path()), pair("a.rs", "b.rs"));
}

#[test_case("pub fn f() -> String { format!(\"{}\", crate::b::g2()) }\n"; "crate path in a macro call")]
#[test_case("pub fn f() { println!(\"{:?}\", vec![b::g()]); }\nuse crate::b;\n"; "imported module in a nested macro call")]
#[test_case("#[derive(Default)]\npub struct S {\n    #[serde(default = \"crate::b::d\")]\n    x: u32,\n}\n"; "a path in an attribute's string")]
#[test_case("pub struct S(pub crate::b::T);\n"; "a type path")]
#[test_case("impl crate::b::Tr for () {}\n"; "a trait in an impl")]
#[test_case("pub fn f() { fn inner() { crate::b::g() } inner() }\n"; "a nested function")]
#[test_case("pub fn f() { use crate::b::g; g() }\n"; "a use inside a function")]
fn a_path_anywhere_in_code_is_an_edge(a_head: &str) {
    let a = format!("{a_head}pub fn back() {{}}\n");
    let b = format!(
        "{B_USES_A}pub fn g2() -> u32 {{ 1 }}\npub fn d() -> u32 {{ 0 }}\npub struct T;\npub trait Tr {{}}\n"
    );
    let dir = tree(&[("lib.rs", "mod a;\nmod b;\n"), ("a.rs", &a), ("b.rs", &b)]);
    assert_eq!(cycles(dir.path()), pair("a.rs", "b.rs"));
}

#[test]
fn a_cycle_through_three_files_is_one_cycle_with_its_loop() {
    let dir = tree(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("a.rs", "pub fn fa() { crate::b::fb() }\n"),
        ("b.rs", "pub fn fb() { crate::c::fc() }\n"),
        ("c.rs", "pub fn fc() { crate::a::fa() }\n"),
    ]);
    let found = findings(dir.path());
    assert_eq!(found.cycles.len(), 1);
    let hops: Vec<(String, String)> = found.cycles[0]
        .edges
        .iter()
        .map(|e| (relative(dir.path(), &e.from), relative(dir.path(), &e.to)))
        .collect();
    let expected = [("a.rs", "b.rs"), ("b.rs", "c.rs"), ("c.rs", "a.rs")];
    assert_eq!(hops.len(), 3);
    for (from, to) in expected {
        assert!(
            hops.contains(&(from.to_string(), to.to_string())),
            "{from} -> {to} missing from {hops:?}"
        );
    }
}

#[test]
fn one_way_uses_are_no_cycle() {
    // The same crates as above with the use back removed.
    let dir = tree(&[
        (
            "lib.rs",
            "mod output;\npub fn helper() {}\npub fn run() { output::html::render() }\n",
        ),
        ("output/mod.rs", "pub mod html;\n"),
        ("output/html.rs", "pub fn render() {}\n"),
    ]);
    let found = findings(dir.path());
    assert!(found.cycles.is_empty(), "{:?}", found.cycles);
    assert_eq!(
        found.edges.len(),
        1,
        "lib.rs -> output/html.rs: {:?}",
        found.edges
    );
}

#[test]
fn a_local_variable_named_like_a_child_module_is_no_edge() {
    let a = "mod b;\npub fn back() {}\npub fn f(b: u32) -> u32 { b + 1 }\n";
    let dir = tree(&[
        ("lib.rs", "mod a;\n"),
        ("a.rs", a),
        ("a/b.rs", "pub fn g() { super::back() }\n"),
    ]);
    assert!(cycles(dir.path()).is_empty());
}

#[test_case("#[cfg(test)]\nmod tests {\n    use crate::b::g;\n}\n"; "inline test module")]
#[test_case("#[cfg(all(test, unix))]\nmod tests {\n    use crate::b::g;\n}\n"; "all(test, ..)")]
#[test_case("#[cfg(test)]\nmod tests;\n"; "test module in its own file")]
fn a_test_module_is_left_out(a_tail: &str) {
    let a = format!("pub fn back() {{}}\n{a_tail}");
    let dir = tree(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", &a),
        ("a/tests.rs", "use crate::b::g;\n"),
        ("b.rs", B_USES_A),
    ]);
    assert!(cycles(dir.path()).is_empty());
}

#[test]
fn a_module_under_any_test_or_a_feature_is_read() {
    let a = "pub fn back() {}\n#[cfg(any(test, feature = \"fake\"))]\nmod fake {\n    use crate::b::g;\n}\n";
    let dir = tree(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", a),
        ("b.rs", B_USES_A),
    ]);
    assert_eq!(cycles(dir.path()), pair("a.rs", "b.rs"));
}

#[test]
fn a_missing_module_file_is_an_error_naming_the_file_and_line() {
    let dir = tree(&[("lib.rs", "//! A crate.\nmod gone;\n")]);
    let err = vramtest_archcheck::check(&[dir.path().to_path_buf()], 100)
        .expect_err("gone.rs is missing");
    assert_eq!(err.line, Some(2));
    assert!(err.file.ends_with("lib.rs"), "{err}");
    assert!(err.to_string().contains("gone.rs"), "{err}");
}

#[test]
fn a_file_that_does_not_parse_is_an_error_naming_its_line() {
    let dir = tree(&[
        ("lib.rs", "mod a;\n"),
        ("a.rs", "pub fn f() {}\n\nfn broken( {\n"),
    ]);
    let err = vramtest_archcheck::check(&[dir.path().to_path_buf()], 100)
        .expect_err("a.rs does not parse");
    assert!(err.file.ends_with("a.rs"), "{err}");
    assert_eq!(err.line, Some(3), "{err}");
}

/// The modules of each cycle between siblings, as `harness` strings.
fn module_cycles(dir: &std::path::Path) -> Vec<Vec<String>> {
    findings(dir)
        .module_cycles
        .iter()
        .map(|c| c.modules.clone())
        .collect()
}

/// `harness` → `harness::child` → `probe` → `harness::registry` (through the
/// `harness::TestDef` re-export): no file uses a file that uses it back, but the two
/// modules depend on each other. The loop is named with the uses that make it.
#[test]
fn sibling_modules_that_use_each_other_through_their_children_are_a_cycle() {
    let files = |probe: &'static str| {
        tree(&[
            ("lib.rs", "mod harness;\nmod probe;\n"),
            (
                "harness/mod.rs",
                "mod child;\nmod registry;\npub use registry::TestDef;\n",
            ),
            (
                "harness/child.rs",
                "pub fn run() { crate::probe::measure() }\n",
            ),
            ("harness/registry.rs", "pub struct TestDef;\n"),
            ("probe.rs", probe),
        ])
    };
    let dir = files("pub fn measure() { let _ = crate::harness::TestDef; }\n");
    assert!(cycles(dir.path()).is_empty(), "{:?}", cycles(dir.path()));
    assert_eq!(
        module_cycles(dir.path()),
        vec![vec!["harness".to_string(), "probe".to_string()]]
    );
    let found = findings(dir.path());
    let edges: Vec<(String, String, String)> = found.module_cycles[0]
        .edges
        .iter()
        .map(|e| {
            (
                relative(dir.path(), &e.from),
                e.path.clone(),
                relative(dir.path(), &e.to),
            )
        })
        .collect();
    assert_eq!(
        edges,
        [
            (
                "harness/child.rs".to_string(),
                "crate::probe::measure".to_string(),
                "probe.rs".to_string()
            ),
            (
                "probe.rs".to_string(),
                "crate::harness::TestDef".to_string(),
                "harness/registry.rs".to_string()
            ),
        ]
    );
    // The probe taking what it needs instead: no cycle.
    let dir = files("pub fn measure() {}\n");
    assert!(module_cycles(dir.path()).is_empty());
}

/// The same one level down: `a::x` and `a::y` use each other through their children.
#[test]
fn nested_sibling_modules_are_checked_too() {
    let dir = tree(&[
        ("lib.rs", "mod a;\n"),
        ("a/mod.rs", "mod x;\nmod y;\n"),
        ("a/x/mod.rs", "mod p;\nmod q;\n"),
        ("a/x/p.rs", "pub fn f() { crate::a::y::g() }\n"),
        ("a/x/q.rs", "pub fn h() {}\n"),
        ("a/y.rs", "pub fn g() {}\npub fn k() { super::x::q::h() }\n"),
    ]);
    assert_eq!(
        module_cycles(dir.path()),
        vec![vec!["a::x".to_string(), "a::y".to_string()]]
    );
}
