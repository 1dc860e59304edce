//! The settings under plain `cargo test` (and nextest): the crate's
//! `[package.metadata.vramtest]` over its workspace's `[workspace.metadata.vramtest]`,
//! found the way cargo finds them and read with the parser `cargo vramtest` uses
//! ([`Settings::parse`]), so both give the same comparison. `cargo vramtest` hands its
//! own reading over instead (`VRAMTEST_CONFIG`).

use std::path::{Path, PathBuf};
use vramtest_model::env::HarnessEnv;
use vramtest_model::settings::{Settings, SettingsError};

/// A manifest that cannot be read, or whose `vramtest` table has bad keys.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The manifest cannot be read.
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The manifest is not TOML.
    #[error("{}: {source}", path.display())]
    Toml {
        path: PathBuf,
        source: toml::de::Error,
    },
    /// A `vramtest` table cannot be put in its JSON form.
    #[error("{}: {source}", path.display())]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// Every bad key of a `vramtest` table, in the manifest's order, each with its line
    /// where it can be found.
    #[error("{}", bad_keys(path, table, problems))]
    Settings {
        path: PathBuf,
        /// The table (`package.metadata.vramtest`).
        table: String,
        problems: Vec<(Option<usize>, SettingsError)>,
    },
}

/// One line per bad key: `Cargo.toml:5: [package.metadata.vramtest] `iteration`: ...`.
fn bad_keys(path: &Path, table: &str, problems: &[(Option<usize>, SettingsError)]) -> String {
    problems
        .iter()
        .map(|(line, e)| {
            let line = line.map(|l| format!(":{l}")).unwrap_or_default();
            format!("{}{line}: [{table}] {e}", path.display())
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The settings of a run of the crate at `manifest_dir`: those `cargo vramtest` handed
/// over (`VRAMTEST_CONFIG`, read into `env`), else its manifests'. The one way the
/// harness's parent and child come to their settings.
pub fn of_run(env: &HarnessEnv, manifest_dir: &Path) -> Result<Settings, ManifestError> {
    match &env.settings {
        Some(handed) => Ok(handed.clone()),
        None => settings(manifest_dir),
    }
}

/// The merged settings for the crate at `manifest_dir`.
pub fn settings(manifest_dir: &Path) -> Result<Settings, ManifestError> {
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

fn read(path: &Path) -> Result<String, ManifestError> {
    std::fs::read_to_string(path).map_err(|source| ManifestError::Read {
        path: path.to_owned(),
        source,
    })
}

fn parse(path: &Path, text: &str) -> Result<toml::Table, ManifestError> {
    toml::from_str(text).map_err(|source| ManifestError::Toml {
        path: path.to_owned(),
        source,
    })
}

/// The manifest with the `[workspace]` table, found the way cargo finds it: the one
/// `package.workspace` names, else the nearest ancestor's whose workspace does not
/// exclude the crate (`None`: the crate is its own workspace, read with the package).
/// A manifest on the way that does not parse is an error, as it is for cargo.
fn workspace_manifest(
    manifest_dir: &Path,
    own: &toml::Table,
) -> Result<Option<(PathBuf, String, toml::Table)>, ManifestError> {
    if own.contains_key("workspace") {
        return Ok(None);
    }
    let named = own
        .get("package")
        .and_then(|p| p.get("workspace"))
        .and_then(|w| w.as_str())
        .map(|w| manifest_dir.join(w));
    let explicit = named.is_some();
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
        let Some(workspace) = table.get("workspace") else {
            continue;
        };
        if explicit || !excludes(&dir, workspace, manifest_dir) {
            return Ok(Some((path, text, table)));
        }
    }
    Ok(None)
}

/// cargo's rule: a workspace at `root` excludes the crate at `crate_dir` when an
/// `exclude` entry is a prefix of its path and no `members` entry is.
fn excludes(root: &Path, workspace: &toml::Value, crate_dir: &Path) -> bool {
    let under = |key: &str| {
        workspace
            .get(key)
            .and_then(|v| v.as_array())
            .is_some_and(|entries| {
                entries
                    .iter()
                    .filter_map(|e| e.as_str())
                    .any(|e| crate_dir.starts_with(root.join(e)))
            })
    };
    under("exclude") && !under("members")
}

/// `[<section>.metadata.vramtest]` of one manifest (`package` or `workspace`); for a
/// crate that is its own workspace, both sections live in one file.
fn table_settings(
    path: &Path,
    text: &str,
    table: &toml::Table,
    section: &str,
) -> Result<Settings, ManifestError> {
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
        let json = serde_json::to_value(value).map_err(|source| ManifestError::Json {
            path: path.to_owned(),
            source,
        })?;
        let name = format!("{s}.metadata.vramtest");
        let settings = Settings::parse(&json).map_err(|errors| ManifestError::Settings {
            path: path.to_owned(),
            problems: errors
                .in_file_order(text, &name)
                .into_iter()
                .map(|(line, e)| (line, e.clone()))
                .collect(),
            table: name,
        })?;
        merged = merged.overridden_by(&settings);
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    fn crate_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn the_package_overrides_its_workspace() {
        let root = crate_dir(&[
            (
                "Cargo.toml",
                "[workspace]\nmembers = [\"a\"]\n[workspace.metadata.vramtest]\niterations = 5\nbudget = \"1GiB\"\n",
            ),
            (
                "a/Cargo.toml",
                "[package]\nname = \"a\"\n[package.metadata.vramtest]\niterations = 2\n",
            ),
        ]);
        let s = settings(&root.path().join("a")).unwrap();
        assert_eq!(s.iterations, Some(2));
        assert_eq!(s.budget, Some(1 << 30));
    }

    #[test]
    fn a_bad_key_names_the_manifest_and_line() {
        let root = crate_dir(&[(
            "Cargo.toml",
            "[package]\nname = \"a\"\n\n[package.metadata.vramtest]\niteration = 2\n[workspace]\n",
        )]);
        let e = settings(root.path()).unwrap_err().to_string();
        assert!(
            e.contains("Cargo.toml:5: [package.metadata.vramtest] `iteration`"),
            "{e}"
        );
    }

    #[test]
    fn settings_handed_over_win_over_the_manifests() {
        let root = crate_dir(&[(
            "Cargo.toml",
            "[package]\nname = \"a\"\n[package.metadata.vramtest]\niterations = 2\n",
        )]);
        let plain = of_run(&HarnessEnv::default(), root.path()).unwrap();
        assert_eq!(plain, settings(root.path()).unwrap());
        assert_eq!(plain.iterations, Some(2));
        let handed = Settings {
            iterations: Some(9),
            ..Settings::default()
        };
        let env = HarnessEnv {
            settings: Some(handed.clone()),
            ..HarnessEnv::default()
        };
        assert_eq!(of_run(&env, root.path()).unwrap(), handed);
    }

    #[test]
    fn no_tables_are_the_defaults() {
        let root = crate_dir(&[("Cargo.toml", "[package]\nname = \"a\"\n")]);
        assert_eq!(settings(root.path()).unwrap(), Settings::default());
    }

    const WORKSPACE: &str = "[workspace]\nmembers = [\"a\"]\nexclude = [\"fixtures\"]\n[workspace.metadata.vramtest]\niterations = 5\n";

    #[test_case("a", Some(5); "a member")]
    #[test_case("fixtures/b", None; "an excluded crate is its own workspace")]
    fn an_excluded_crate_does_not_take_the_workspace_settings(dir: &str, iterations: Option<u32>) {
        let root = crate_dir(&[
            ("Cargo.toml", WORKSPACE),
            ("a/Cargo.toml", "[package]\nname = \"a\"\n"),
            ("fixtures/b/Cargo.toml", "[package]\nname = \"b\"\n"),
        ]);
        let s = settings(&root.path().join(dir)).unwrap();
        assert_eq!(s.iterations, iterations);
    }

    #[test]
    fn a_workspace_above_an_excluding_one_is_found() {
        let root = crate_dir(&[
            (
                "Cargo.toml",
                "[workspace]\n[workspace.metadata.vramtest]\niterations = 7\n",
            ),
            (
                "inner/Cargo.toml",
                "[workspace]\nexclude = [\"b\"]\n[workspace.metadata.vramtest]\niterations = 5\n",
            ),
            ("inner/b/Cargo.toml", "[package]\nname = \"b\"\n"),
        ]);
        let s = settings(&root.path().join("inner/b")).unwrap();
        assert_eq!(s.iterations, Some(7));
    }
}
