//! Which packages and test targets are ours: workspace members that depend on
//! `vramtest`, and of those only their `harness = false` test targets and library (a
//! plain libtest target is never run), narrowed by `--test` and `--lib` as cargo does. `cargo metadata` does not report `harness`, so it is read from
//! the manifest's `[[test]]` tables: a target cargo discovers on its own always has the
//! libtest harness.

use crate::cli::Selection;
use crate::error::{Error, Result};
use cargo_metadata::{Metadata, MetadataCommand, TargetKind};
use std::path::{Path, PathBuf};
use vramtest_model::settings::Settings;

pub mod test_tables;
use test_tables::{harness_free_lib, harness_free_tests};

/// The workspace as far as vramtest is concerned.
#[derive(Debug, Clone)]
pub struct Workspace {
    pub root: PathBuf,
    /// The workspace's `Cargo.toml`.
    pub manifest: PathBuf,
    /// The selected packages that have vramtest targets, by name.
    pub packages: Vec<Package>,
    /// cargo's target directory: the harness keeps each test's timeline under it.
    pub target_dir: PathBuf,
}

/// A workspace member with vramtest test targets.
#[derive(Debug, Clone)]
pub struct Package {
    pub name: String,
    /// cargo's package id, as its JSON messages spell it.
    pub id: String,
    pub version: String,
    /// The directory of its `Cargo.toml`; tests run here, snapshots live under it.
    pub dir: PathBuf,
    /// Its vramtest targets: the `harness = false` test targets, and the library's when
    /// [`Package::lib`] names it.
    pub targets: Vec<String>,
    /// The library's target name when its tests are a vramtest target (`[lib]` with
    /// `harness = false`) and selected.
    pub lib: Option<String>,
    /// The workspace's `vramtest` metadata overridden by the package's.
    pub settings: Settings,
}

impl Package {
    /// `<package>/tests/snapshots`.
    pub fn snapshot_dir(&self) -> PathBuf {
        self.dir.join("tests").join("snapshots")
    }
}

/// The `cargo` to run: the one that ran us (`$CARGO`), else `cargo` on the PATH.
pub fn cargo() -> std::ffi::OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// Runs `cargo metadata` and selects the packages and targets to test. `flags` are
/// cargo's `--locked`/`--offline`/`--frozen`.
pub fn discover(selection: &Selection, flags: Vec<String>) -> Result<Workspace> {
    let mut cmd = MetadataCommand::new();
    cmd.no_deps().cargo_path(cargo()).other_options(flags);
    if let Some(path) = &selection.manifest_path {
        cmd.manifest_path(path);
    }
    let metadata = cmd.exec().map_err(Error::Metadata)?;
    select_packages(&metadata, selection)
}

/// The workspace's members that `selection` names and that have vramtest targets,
/// with the targets `--test` and `--lib` name (every one when neither is given).
fn select_packages(metadata: &Metadata, selection: &Selection) -> Result<Workspace> {
    let root = metadata.workspace_root.clone().into_std_path_buf();
    let ws_manifest = root.join("Cargo.toml");
    let members = metadata.workspace_packages();
    let member_names = || {
        members
            .iter()
            .map(|p| p.name.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let named = if selection.workspace {
        &selection.exclude
    } else {
        &selection.packages
    };
    for name in named {
        // `-p name` or `-p name@version`.
        let bare = name.split('@').next().unwrap_or(name);
        if !members.iter().any(|p| p.name.as_str() == bare) {
            return Err(Error::UnknownPackage {
                name: name.clone(),
                workspace: root.clone(),
                members: member_names(),
            });
        }
    }
    let ws_settings = parse_settings(
        &metadata.workspace_metadata["vramtest"],
        &ws_manifest,
        "workspace.metadata.vramtest",
    )?;
    let mut found = Vec::new();
    for pkg in members {
        if !chosen(selection, pkg.name.as_str())
            || !pkg.dependencies.iter().any(|d| d.name == "vramtest")
        {
            continue;
        }
        if let Some(candidate) = candidate(pkg, &root, &ws_settings)? {
            found.push(candidate);
        }
    }
    let mut packages = select_targets(selection, found)?;
    packages.sort_by(|a, b| a.name.cmp(&b.name));
    if packages.is_empty() {
        return Err(Error::NoTargets { workspace: root });
    }
    Ok(Workspace {
        root,
        manifest: ws_manifest,
        packages,
        target_dir: metadata.target_directory.clone().into_std_path_buf(),
    })
}

/// Whether the package selection takes the member `name`: cargo's rule, every member
/// less `--exclude` with `--workspace` (which outranks `-p`), else those `-p` names,
/// else every member.
fn chosen(selection: &Selection, name: &str) -> bool {
    let named = |list: &[String]| list.iter().any(|p| p.split('@').next() == Some(name));
    if selection.workspace {
        !named(&selection.exclude)
    } else {
        selection.packages.is_empty() || named(&selection.packages)
    }
}

/// A member that uses vramtest, with every vramtest target it has, and the names of its
/// test targets that use libtest's harness (for the message when `--test` names one).
struct Candidate {
    package: Package,
    libtest: Vec<String>,
}

/// `pkg` as a [`Candidate`], `None` when it has no vramtest target.
fn candidate(
    pkg: &cargo_metadata::Package,
    root: &Path,
    ws_settings: &Settings,
) -> Result<Option<Candidate>> {
    let manifest = pkg.manifest_path.clone().into_std_path_buf();
    let text = std::fs::read_to_string(&manifest).map_err(Error::io(&manifest))?;
    let manifest_error = |source| Error::Manifest {
        path: manifest.clone(),
        source,
    };
    let custom = harness_free_tests(&text).map_err(manifest_error)?;
    let lib = match harness_free_lib(&text).map_err(manifest_error)? {
        true => pkg
            .targets
            .iter()
            .find(|t| t.is_lib())
            .map(|t| t.name.clone()),
        false => None,
    };
    let (mut targets, libtest): (Vec<String>, Vec<String>) = pkg
        .targets
        .iter()
        .filter(|t| t.kind.contains(&TargetKind::Test))
        .map(|t| t.name.clone())
        .partition(|name| custom.contains(name));
    targets.extend(lib.clone());
    if targets.is_empty() {
        return Ok(None);
    }
    let own = parse_settings(
        &pkg.metadata["vramtest"],
        &manifest,
        "package.metadata.vramtest",
    )?;
    Ok(Some(Candidate {
        package: Package {
            name: pkg.name.to_string(),
            id: pkg.id.repr.clone(),
            version: pkg.version.to_string(),
            dir: manifest
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| root.to_owned()),
            targets,
            lib,
            settings: ws_settings.clone().overridden_by(&own),
        },
        libtest,
    }))
}

/// The packages with the targets `--test` and `--lib` keep (all of them when neither
/// is given); a package left without one is dropped. Each `--test` name, and `--lib`,
/// must find a vramtest target in at least one package, as in cargo.
fn select_targets(selection: &Selection, found: Vec<Candidate>) -> Result<Vec<Package>> {
    if selection.tests.is_empty() && !selection.lib {
        return Ok(found.into_iter().map(|c| c.package).collect());
    }
    let unknown = |wanted: String, why: String| Error::UnknownTarget {
        wanted,
        why,
        available: available_targets(&found),
    };
    for name in &selection.tests {
        let is_test = |c: &Candidate| {
            c.package.lib.as_ref() != Some(name) && c.package.targets.contains(name)
        };
        if found.iter().any(is_test) {
            continue;
        }
        let why = match found.iter().find(|c| c.libtest.contains(name)) {
            Some(c) => format!(
                "`{name}` in {} uses libtest's harness, which cargo vramtest never runs (a vramtest target has `harness = false`)",
                c.package.name
            ),
            None => format!("no vramtest test target is named `{name}`"),
        };
        return Err(unknown(format!("--test {name}"), why));
    }
    if selection.lib && found.iter().all(|c| c.package.lib.is_none()) {
        let why = "no selected library is a vramtest target (one is when its `[lib]` says `harness = false` and it ends with `#[cfg(test)] vramtest::main!();`)".to_owned();
        return Err(unknown("--lib".into(), why));
    }
    Ok(found
        .into_iter()
        .filter_map(|c| {
            let mut package = c.package;
            let lib = package.lib.clone();
            package.targets.retain(|t| {
                if lib.as_ref() == Some(t) {
                    selection.lib
                } else {
                    selection.tests.contains(t)
                }
            });
            if lib.as_ref().is_some_and(|l| !package.targets.contains(l)) {
                package.lib = None;
            }
            (!package.targets.is_empty()).then_some(package)
        })
        .collect())
}

/// `pkg: vram, mem (lib)` per package that uses vramtest, `; `-separated.
fn available_targets(found: &[Candidate]) -> String {
    let list: Vec<String> = found
        .iter()
        .map(|c| {
            let targets: Vec<String> = c
                .package
                .targets
                .iter()
                .map(|t| match c.package.lib.as_ref() == Some(t) {
                    true => format!("{t} (--lib)"),
                    false => format!("--test {t}"),
                })
                .collect();
            format!("{}: {}", c.package.name, targets.join(", "))
        })
        .collect();
    match list.is_empty() {
        true => "none".into(),
        false => list.join("; "),
    }
}

/// Parses one `vramtest` table; an error names the manifest and, where it can be
/// found, the line of the offending key.
fn parse_settings(
    value: &serde_json::Value,
    manifest: &Path,
    table: &'static str,
) -> Result<Settings> {
    Settings::parse(value).map_err(|errors| {
        let text = std::fs::read_to_string(manifest).unwrap_or_default();
        Error::Config {
            manifest: manifest.to_owned(),
            table,
            problems: errors
                .in_file_order(&text, table)
                .into_iter()
                .map(|(line, e)| (line, e.clone()))
                .collect(),
        }
    })
}
