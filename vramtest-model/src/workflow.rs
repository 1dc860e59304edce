//! GitHub Actions' workflow commands in text that is only to be shown: a test's own
//! output may print `::error::` or `::add-mask::`, which the runner would obey if it
//! were echoed raw. Shared by `cargo vramtest` and the harness (under plain
//! `cargo test`), which both echo a failing test's output.

/// Whether we run under GitHub Actions (`GITHUB_ACTIONS=true`).
pub fn github_actions() -> bool {
    std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true")
}

/// `text` printed so that the runner runs no workflow command in it: between
/// `::stop-commands::TOKEN` and `::TOKEN::`, with a random token that `text` does not
/// hold, so nothing in it can end the stop early.
pub fn inert(text: &str) -> String {
    let token = loop {
        let t = token();
        if !text.contains(&t) {
            break t;
        }
    };
    inert_with(text, &token)
}

/// [`inert`] with a given `token`.
pub fn inert_with(text: &str, token: &str) -> String {
    let end = if text.ends_with('\n') { "" } else { "\n" };
    format!("::stop-commands::{token}\n{text}{end}::{token}::\n")
}

/// A fresh random token (`vramtest-` and 32 hex digits).
fn token() -> String {
    use std::hash::BuildHasher;
    let state = std::collections::hash_map::RandomState::new();
    format!(
        "vramtest-{:016x}{:016x}",
        state.hash_one(1u8),
        state.hash_one(2u8)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inert_text_stops_commands_with_a_token_it_does_not_hold() {
        let text = "::error::boom\n::add-mask::secret\n";
        let a = inert(text);
        let token = a
            .strip_prefix("::stop-commands::")
            .and_then(|rest| rest.split('\n').next())
            .unwrap()
            .to_owned();
        assert_eq!(a, inert_with(text, &token));
        assert_eq!(
            inert_with(text, "T"),
            "::stop-commands::T\n::error::boom\n::add-mask::secret\n::T::\n"
        );
        assert_eq!(inert_with("x", "T"), "::stop-commands::T\nx\n::T::\n");
        assert!(token.len() > 20 && !text.contains(&token), "{token}");
        // Random: another call picks another token, so a test cannot print the end.
        assert_ne!(a, inert(text));
    }
}
