//! Settings under plain `cargo test` (and nextest): the crate's
//! `[package.metadata.vramtest]` over its workspace's `[workspace.metadata.vramtest]`,
//! read with the parser `cargo vramtest` uses, so both give the same comparison.
//! `cargo vramtest` hands its own reading over in `VRAMTEST_CONFIG` instead.

use std::path::{Path, PathBuf};
use vramtest_model::config::{Settings, key_line};

/// The merged settings for the crate at `manifest_dir`.
pub fn from_manifests(manifest_dir: &Path) -> Result<Settings, String> {
    let own = manifest_dir.join("Cargo.toml");
    let own_text = read(&own)?;
    let own_table = parse(&own, &own_text)?;
    let package = table_settings(&own, &own_text, &own_table, "package")?;
    let workspace = match workspace_manifest(manifest_dir, &own_table)? {
        Some((path, text, table)) => table_settings(&path, &text, &table, "workspace")?,
        None => Settings::default(),
    };
    Ok(workspace.overridden_by(&package))
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn parse(path: &Path, text: &str) -> Result<toml::Table, String> {
    toml::from_str(text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The manifest with the `[workspace]` table, found the way cargo finds it: the one
/// `package.workspace` names, else the nearest ancestor's (`None`: the crate is its
/// own workspace, read with the package). A manifest on the way that does not parse
/// is an error, as it is for cargo.
fn workspace_manifest(
    manifest_dir: &Path,
    own: &toml::Table,
) -> Result<Option<(PathBuf, String, toml::Table)>, String> {
    if own.contains_key("workspace") {
        return Ok(None);
    }
    let named = own
        .get("package")
        .and_then(|p| p.get("workspace"))
        .and_then(|w| w.as_str())
        .map(|w| manifest_dir.join(w));
    let candidates: Vec<PathBuf> = match named {
        Some(dir) => vec![dir],
        None => manifest_dir
            .ancestors()
            .skip(1)
            .map(Path::to_owned)
            .collect(),
    };
    for dir in candidates {
        let path = dir.join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let table = parse(&path, &text)?;
        if table.contains_key("workspace") {
            return Ok(Some((path, text, table)));
        }
    }
    Ok(None)
}

/// `[<section>.metadata.vramtest]` of one manifest (`package` or `workspace`); for a
/// crate that is its own workspace, both sections live in one file.
fn table_settings(
    path: &Path,
    text: &str,
    table: &toml::Table,
    section: &str,
) -> Result<Settings, String> {
    let sections: &[&str] = if section == "package" && table.contains_key("workspace") {
        &["workspace", "package"]
    } else {
        &[section]
    };
    let mut merged = Settings::default();
    for s in sections {
        let value = table
            .get(*s)
            .and_then(|t| t.get("metadata"))
            .and_then(|m| m.get("vramtest"));
        let Some(value) = value else { continue };
        let json = serde_json::to_value(value).map_err(|e| format!("{}: {e}", path.display()))?;
        let name = format!("{s}.metadata.vramtest");
        let settings = Settings::parse(&json).map_err(|e| {
            let line = key_line(text, &name, &e.key)
                .map(|l| format!(":{l}"))
                .unwrap_or_default();
            format!("{}{line}: [{name}] {e}", path.display())
        })?;
        merged = merged.overridden_by(&settings);
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crate_dir(label: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("vramtest-settings-{}-{label}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (name, text) in files {
            let path = dir.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn the_package_overrides_its_workspace() {
        let root = crate_dir(
            "merge",
            &[
                (
                    "Cargo.toml",
                    "[workspace]\nmembers = [\"a\"]\n[workspace.metadata.vramtest]\niterations = 5\nbudget = \"1GiB\"\n",
                ),
                (
                    "a/Cargo.toml",
                    "[package]\nname = \"a\"\n[package.metadata.vramtest]\niterations = 2\n",
                ),
            ],
        );
        let s = from_manifests(&root.join("a")).unwrap();
        assert_eq!(s.iterations, Some(2));
        assert_eq!(s.budget, Some(1 << 30));
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn a_bad_key_names_the_manifest_and_line() {
        let root = crate_dir(
            "bad",
            &[(
                "Cargo.toml",
                "[package]\nname = \"a\"\n\n[package.metadata.vramtest]\niteration = 2\n[workspace]\n",
            )],
        );
        let e = from_manifests(&root).unwrap_err();
        assert!(
            e.contains("Cargo.toml:5: [package.metadata.vramtest] `iteration`"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn no_tables_are_the_defaults() {
        let root = crate_dir("none", &[("Cargo.toml", "[package]\nname = \"a\"\n")]);
        assert_eq!(from_manifests(&root).unwrap(), Settings::default());
        let _ = std::fs::remove_dir_all(root);
    }
}
