//! Which packages and test targets are ours: workspace members that depend on
//! `vramtest`, and of those only their `harness = false` test targets (a plain libtest
//! target is never run). `cargo metadata` does not report `harness`, so it is read from
//! the manifest's `[[test]]` tables: a target cargo discovers on its own always has the
//! libtest harness.

use crate::cli::Selection;
use crate::error::{Error, Result};
use cargo_metadata::{Metadata, MetadataCommand, TargetKind};
use std::path::{Path, PathBuf};
use vramtest_model::settings::Settings;

pub mod test_tables;
use test_tables::harness_free_tests;

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
    /// Its `harness = false` test targets.
    pub targets: Vec<String>,
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

/// The workspace's members that `selection` names and that have vramtest targets.
fn select_packages(metadata: &Metadata, selection: &Selection) -> Result<Workspace> {
    let root = metadata.workspace_root.clone().into_std_path_buf();
    let ws_manifest = root.join("Cargo.toml");
    let members = metadata.workspace_packages();
    for name in &selection.packages {
        // `-p name` or `-p name@version`.
        let bare = name.split('@').next().unwrap_or(name);
        if !members.iter().any(|p| p.name.as_str() == bare) {
            return Err(Error::UnknownPackage {
                name: name.clone(),
                workspace: root.clone(),
                members: members
                    .iter()
                    .map(|p| p.name.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    let ws_settings = parse_settings(
        &metadata.workspace_metadata["vramtest"],
        &ws_manifest,
        "workspace.metadata.vramtest",
    )?;
    let mut packages = Vec::new();
    for pkg in members {
        let name = pkg.name.to_string();
        let chosen = if selection.packages.is_empty() {
            !selection.exclude.contains(&name)
        } else {
            selection
                .packages
                .iter()
                .any(|p| p.split('@').next() == Some(name.as_str()))
        };
        if !chosen || !pkg.dependencies.iter().any(|d| d.name == "vramtest") {
            continue;
        }
        let manifest = pkg.manifest_path.clone().into_std_path_buf();
        let text = std::fs::read_to_string(&manifest).map_err(Error::io(&manifest))?;
        let custom = harness_free_tests(&text).map_err(|source| Error::Manifest {
            path: manifest.clone(),
            source,
        })?;
        let targets: Vec<String> = pkg
            .targets
            .iter()
            .filter(|t| t.kind.contains(&TargetKind::Test) && custom.contains(&t.name))
            .map(|t| t.name.clone())
            .collect();
        if targets.is_empty() {
            continue;
        }
        let own = parse_settings(
            &pkg.metadata["vramtest"],
            &manifest,
            "package.metadata.vramtest",
        )?;
        packages.push(Package {
            name,
            id: pkg.id.repr.clone(),
            version: pkg.version.to_string(),
            dir: manifest
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| root.clone()),
            targets,
            settings: ws_settings.clone().overridden_by(&own),
        });
    }
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
