//! Functions over 100 lines, wherever they are outside tests; the length is counted
//! here from the text written, independently of the parser.

mod common;

use common::{findings, relative, tree};

/// A function `name` of `body_lines` statement lines: `body_lines + 2` lines in all
/// (the `fn` line and the closing brace).
fn function(head: &str, name: &str, body_lines: usize) -> String {
    let mut text = format!("{head}fn {name}() {{\n");
    for i in 0..body_lines {
        text.push_str(&format!("    let _x{i} = {i};\n"));
    }
    text.push_str("}\n");
    text
}

/// (name, lines, line) of what the check reports in `dir`.
fn long(dir: &std::path::Path) -> Vec<(String, usize, usize)> {
    findings(dir)
        .long
        .into_iter()
        .map(|f| (f.name, f.lines, f.line))
        .collect()
}

#[test]
fn a_function_of_101_lines_is_reported_and_one_of_100_is_not() {
    let lib = format!("{}{}", function("pub ", "ok", 98), function("", "over", 99));
    let dir = tree(&[("lib.rs", &lib)]);
    // `ok` is lines 1..=100, `over` starts on line 101.
    assert_eq!(long(dir.path()), vec![("over".to_string(), 101, 101)]);
}

#[test]
fn a_function_after_a_test_module_is_read() {
    let lib = format!(
        "//! A crate.\n#[cfg(test)]\nmod tests {{\n    #[test]\n    fn t() {{}}\n}}\n\n{}",
        function("pub(crate) ", "after", 120)
    );
    let dir = tree(&[("lib.rs", &lib)]);
    assert_eq!(long(dir.path()), vec![("after".to_string(), 122, 8)]);
}

#[test]
fn braces_in_strings_and_characters_do_not_end_a_function() {
    // A closing brace in a string first (as a counter of braces would end the
    // function there), then one in a character.
    let mut body = String::from("pub fn braces() {\n    let s = \"}\";\n    let c = '}';\n");
    for i in 0..110 {
        body.push_str(&format!("    let _y{i} = ({i}, s, c);\n"));
    }
    body.push_str("}\n");
    let dir = tree(&[("lib.rs", &body)]);
    assert_eq!(long(dir.path()), vec![("braces".to_string(), 114, 1)]);
}

#[test]
fn methods_nested_functions_and_trait_defaults_are_counted() {
    let method = function("    pub ", "method", 101).replace('\n', "\n    ");
    let nested = function("    ", "nested", 105).replace('\n', "\n    ");
    let default = function("    ", "default", 103).replace('\n', "\n    ");
    let lib = format!(
        "pub struct S;\nimpl S {{\n    {method}}}\n\
         pub fn outer() {{\n    {nested}}}\n\
         pub trait T {{\n    {default}}}\n"
    );
    let dir = tree(&[("lib.rs", &lib)]);
    let mut found: Vec<(String, usize)> = long(dir.path())
        .into_iter()
        .map(|(name, lines, _)| (name, lines))
        .collect();
    found.sort();
    // `outer` holds `nested` and two more lines: 109 lines, reported too.
    let expected = vec![
        ("S::method".to_string(), 103),
        ("T::default".to_string(), 105),
        ("nested".to_string(), 107),
        ("outer".to_string(), 109),
    ];
    assert_eq!(found, expected);
}

#[test]
fn a_multi_line_signature_counts_from_the_fn_line() {
    let lib = format!(
        "/// Docs do not count.\n#[inline]\npub fn wide(\n    a: u32,\n    b: u32,\n) -> u32 {{\n{}    a + b\n}}\n",
        "    let _z = 0;\n".repeat(100)
    );
    let dir = tree(&[("lib.rs", &lib)]);
    // From `pub fn wide(` (line 3) to the brace: `pub fn wide(`, two parameters,
    // `) -> u32 {`, 100 statements, `a + b` and `}`.
    assert_eq!(long(dir.path()), vec![("wide".to_string(), 106, 3)]);
}

#[test]
fn tests_are_left_out_and_every_other_file_is_read() {
    let dir = tree(&[
        (
            "lib.rs",
            &format!(
                "#[cfg(test)]\nmod tests {{\n{}}}\n#[cfg(test)]\nmod more;\n",
                function("", "in_test", 150)
            ),
        ),
        ("more.rs", &function("", "test_file", 150)),
        ("more/deeper.rs", &function("", "test_folder", 150)),
        ("orphan.rs", &function("", "not_in_the_tree", 150)),
    ]);
    let found = findings(dir.path());
    let names: Vec<(String, String)> = found
        .long
        .iter()
        .map(|f| (relative(dir.path(), &f.file), f.name.clone()))
        .collect();
    assert_eq!(
        names,
        vec![("orphan.rs".to_string(), "not_in_the_tree".to_string())]
    );
}
