//! Finding the driver and the CUDA libraries without cudarc's loader.
//!
//! cudarc's own presence checks (`is_culib_present`) exist only when cudarc is built
//! with dynamic loading, and another crate in the same build may turn on
//! `dynamic-linking` instead (candle's `cuda` feature does). So the probe opens the
//! libraries itself, with `libloading`, under the names each CUDA major version gives
//! them (`libcuda.so.1`; `libcublas.so.13` and `.12`; …), and asks the driver the three
//! questions that decide whether tests can run (`cuInit`, `cuDeviceGetCount`,
//! `cuDriverGetVersion`) through symbols it looked up itself: no call here can panic.

use std::ffi::c_int;

/// The names the driver library goes by: the SONAME first (what the NVIDIA driver
/// installs), then the development link (what the toolkit's stub is usually found as).
#[cfg(not(windows))]
pub const LIBCUDA: &[&str] = &["libcuda.so.1", "libcuda.so"];
#[cfg(windows)]
pub const LIBCUDA: &[&str] = &["nvcuda.dll"];

/// `CUDA_ERROR_STUB_LIBRARY`: `cuInit` of the toolkit's stub libcuda.
const CUDA_ERROR_STUB_LIBRARY: c_int = 34;
/// `CUDA_ERROR_NO_DEVICE`.
const CUDA_ERROR_NO_DEVICE: c_int = 100;
/// `CUDA_ERROR_INSUFFICIENT_DRIVER`: the kernel module is older than libcuda.
const CUDA_ERROR_INSUFFICIENT_DRIVER: c_int = 35;

/// The CUDA version of the driver bindings this crate was built with, `(major, minor)`:
/// the version feature some crate of the build turned on in cudarc (ours,
/// `cuda-version-default`, or the user's).
pub fn bindings_version() -> (u32, u32) {
    let v = cudarc::driver::sys::CUDA_VERSION;
    (v / 1000, (v % 1000) / 10)
}

/// The file names a CUDA library `stem` ("cublas", "nvrtc", "cupti") goes by, newest
/// major version first: `libcublas.so.13`, `libcublas.so.12`, `libcublas.so.11`, then the
/// unversioned development link `libcublas.so`.
#[cfg(not(windows))]
pub fn library_names(stem: &str) -> Vec<String> {
    let mut names: Vec<String> = [13, 12, 11]
        .iter()
        .map(|major| format!("lib{stem}.so.{major}"))
        .collect();
    names.push(format!("lib{stem}.so"));
    names
}

/// The file names a CUDA library `stem` goes by on Windows (`cublas64_13.dll`, …).
#[cfg(windows)]
pub fn library_names(stem: &str) -> Vec<String> {
    let mut names: Vec<String> = [13, 12, 11]
        .iter()
        .map(|major| format!("{stem}64_{major}.dll"))
        .collect();
    names.push(format!("{stem}.dll"));
    names
}

/// Whether cudarc's loader, built with bindings of CUDA major version `major`, opens a
/// library found as `name`: it tries the unversioned name, `.so.<bindings major>`,
/// `.so.12`, `.so.11`, `.so.10`, `.so.9` and `.so.1` (cudarc 0.19's
/// `get_lib_name_candidates`), so CUDA 12 bindings do not open `libcublas.so.13`.
pub fn cudarc_opens(name: &str, major: u32) -> bool {
    match name.rsplit_once(".so.") {
        None => true,
        Some((_, suffix)) => {
            suffix == major.to_string() || ["12", "11", "10", "9", "1"].contains(&suffix)
        }
    }
}

/// Where a CUDA library was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Found under `name`, which cudarc's loader opens too.
    Found {
        /// The library name that opened (`libcublas.so.12`).
        name: String,
    },
    /// Found only under `name`, a CUDA major version the bindings' loader does not
    /// look for (CUDA 12 bindings and only `libcublas.so.13`).
    OtherVersion {
        /// The library name that opened (`libcublas.so.13`).
        name: String,
        /// The CUDA version (major, minor) the bindings were generated for.
        bindings: (u32, u32),
    },
    /// Found under none of `tried`.
    Missing {
        /// Every library name tried, in order.
        tried: Vec<String>,
    },
}

impl Lookup {
    /// Why the library cannot be used (`None` when it can), naming the names tried.
    pub fn problem(&self, what: &str) -> Option<String> {
        match self {
            Lookup::Found { .. } => None,
            Lookup::OtherVersion {
                name,
                bindings: (major, minor),
            } => Some(format!(
                "no {what} for these bindings: only {name} is here, and the bindings \
                 (CUDA {major}.{minor}) look for CUDA {major}'s name (hint: build with the \
                 cudarc version feature of the installed CUDA, e.g. `cuda-13000`, with \
                 vramtest's `cuda-version-default` turned off)"
            )),
            Lookup::Missing { tried } => Some(format!(
                "no {what} (tried {}; add its folder to LD_LIBRARY_PATH)",
                tried.join(", ")
            )),
        }
    }
}

/// Looks for the CUDA library `stem` ("cublas", "nvrtc", "cupti") under every name
/// [`library_names`] gives, for bindings of version `bindings`. Opens and closes it.
pub fn find_library(stem: &str, bindings: (u32, u32)) -> Lookup {
    let tried = library_names(stem);
    let found: Vec<&String> = tried.iter().filter(|n| opens(n)).collect();
    if let Some(name) = found.iter().find(|n| cudarc_opens(n, bindings.0)) {
        return Lookup::Found {
            name: (*name).clone(),
        };
    }
    match found.first() {
        Some(name) => Lookup::OtherVersion {
            name: (*name).clone(),
            bindings,
        },
        None => Lookup::Missing { tried },
    }
}

fn opens(name: &str) -> bool {
    // SAFETY: opening a CUDA library runs only its initializers, which have no
    // preconditions; no symbol is called.
    unsafe { libloading::Library::new(name) }.is_ok()
}

/// Why CUDA cannot be used here. Each message says what is missing and what to do.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Unavailable {
    /// No driver library under any of its names.
    #[error(
        "no CUDA driver: libcuda could not be loaded (tried {}; is the NVIDIA driver installed and its library on the loader path?)",
        .tried.join(", ")
    )]
    NoLibrary {
        /// Every library name tried, in order.
        tried: Vec<String>,
    },
    /// The library found is the CUDA toolkit's stub (`cuInit` says so), not a driver.
    #[error(
        "no CUDA driver: {library} is the CUDA toolkit's stub library, not a driver (hint: remove the toolkit's lib64/stubs folder from LD_LIBRARY_PATH, or install the NVIDIA driver)"
    )]
    StubLibrary {
        /// The library name that opened.
        library: String,
    },
    /// A driver, but no device it can use.
    #[error("no CUDA device: the driver reports none (check CUDA_VISIBLE_DEVICES and nvidia-smi)")]
    NoDevice,
    /// The driver supports an older CUDA than the bindings were generated for.
    #[error(
        "CUDA driver too old: it supports CUDA {}.{}, the driver bindings are CUDA {}.{} (hint: update the NVIDIA driver, or build with an older cudarc version feature and vramtest's `cuda-version-default` turned off)",
        .driver.0, .driver.1, .bindings.0, .bindings.1
    )]
    DriverTooOld {
        /// The CUDA version (major, minor) the driver supports.
        driver: (u32, u32),
        /// The CUDA version (major, minor) the bindings were generated for.
        bindings: (u32, u32),
    },
    /// A driver call failed (the kernel module and libcuda disagree, a broken install).
    #[error("no CUDA driver: {call} failed with CUresult {code} (check nvidia-smi)")]
    DriverFailed {
        /// The driver API function called (`cuInit`).
        call: &'static str,
        /// The `CUresult` it returned.
        code: i32,
    },
}

/// What the driver says when asked directly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverProbe {
    /// The library name that opened (`libcuda.so.1`).
    pub library: String,
    /// The number of devices (at least one).
    pub devices: usize,
    /// The CUDA version the driver supports.
    pub cuda_version: (u32, u32),
}

type CuInit = unsafe extern "C" fn(flags: u32) -> c_int;
type CuIntOut = unsafe extern "C" fn(out: *mut c_int) -> c_int;

/// Opens libcuda and asks it whether tests can run: `cuInit(0)`, `cuDriverGetVersion`
/// (against [`bindings_version`]), `cuDeviceGetCount`. Never panics.
pub fn probe_driver() -> Result<DriverProbe, Unavailable> {
    probe_driver_with(LIBCUDA, bindings_version())
}

/// [`probe_driver`] over the library names `names`, for bindings of `bindings`.
pub fn probe_driver_with(names: &[&str], bindings: (u32, u32)) -> Result<DriverProbe, Unavailable> {
    let opened = names.iter().find_map(|name| {
        // SAFETY: see `opens`; the library stays open for the symbol calls below and is
        // kept open afterwards (closing a driver library is never worth the risk).
        unsafe { libloading::Library::new(*name) }
            .ok()
            .map(|lib| (*name, lib))
    });
    let Some((name, lib)) = opened else {
        return Err(Unavailable::NoLibrary {
            tried: names.iter().map(|n| (*n).to_owned()).collect(),
        });
    };
    let lib = Box::leak(Box::new(lib));
    let failed = |call: &'static str, code: c_int| Unavailable::DriverFailed { call, code };
    // SAFETY: the driver API's signatures (cuda.h): `CUresult cuInit(unsigned int)`,
    // `CUresult cuDriverGetVersion(int*)`, `CUresult cuDeviceGetCount(int*)`.
    unsafe {
        let init = lib
            .get::<CuInit>(b"cuInit\0")
            .map_err(|_| failed("cuInit (symbol lookup)", -1))?;
        match init(0) {
            0 => {}
            CUDA_ERROR_STUB_LIBRARY => {
                return Err(Unavailable::StubLibrary {
                    library: name.to_owned(),
                });
            }
            CUDA_ERROR_NO_DEVICE => return Err(Unavailable::NoDevice),
            code => return Err(failed("cuInit", code)),
        }
        let version = lib
            .get::<CuIntOut>(b"cuDriverGetVersion\0")
            .map_err(|_| failed("cuDriverGetVersion (symbol lookup)", -1))?;
        let mut v: c_int = 0;
        match version(&mut v) {
            0 => {}
            code => return Err(failed("cuDriverGetVersion", code)),
        }
        let cuda_version = ((v / 1000) as u32, ((v % 1000) / 10) as u32);
        if cuda_version < bindings {
            return Err(Unavailable::DriverTooOld {
                driver: cuda_version,
                bindings,
            });
        }
        let count = lib
            .get::<CuIntOut>(b"cuDeviceGetCount\0")
            .map_err(|_| failed("cuDeviceGetCount (symbol lookup)", -1))?;
        let mut n: c_int = 0;
        match count(&mut n) {
            0 if n > 0 => {}
            0 | CUDA_ERROR_NO_DEVICE => return Err(Unavailable::NoDevice),
            CUDA_ERROR_INSUFFICIENT_DRIVER => return Err(failed("cuDeviceGetCount", 35)),
            code => return Err(failed("cuDeviceGetCount", code)),
        }
        Ok(DriverProbe {
            library: name.to_owned(),
            devices: n as usize,
            cuda_version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_13_names_come_first_then_12_then_the_link() {
        #[cfg(not(windows))]
        assert_eq!(
            library_names("cublas"),
            [
                "libcublas.so.13",
                "libcublas.so.12",
                "libcublas.so.11",
                "libcublas.so"
            ]
        );
    }

    /// cudarc 0.19's candidate names, by bindings major version.
    #[test]
    fn which_names_cudarc_opens() {
        let cases = [
            ("libcublas.so", 12, true),
            ("libcublas.so.12", 12, true),
            ("libcublas.so.13", 12, false),
            ("libcublas.so.13", 13, true),
            ("libcublas.so.12", 13, true),
            ("libcupti.so.11", 13, true),
            ("libcuda.so.1", 12, true),
        ];
        for (name, major, expected) in cases {
            assert_eq!(cudarc_opens(name, major), expected, "{name} with {major}");
        }
    }

    #[test]
    fn a_missing_library_names_every_name_tried() {
        let lookup = find_library("vramtest-no-such-library", (12, 8));
        let Lookup::Missing { tried } = &lookup else {
            panic!("{lookup:?}");
        };
        assert_eq!(tried.len(), 4);
        let text = lookup.problem("cuBLAS").unwrap();
        assert!(text.starts_with("no cuBLAS (tried "), "{text}");
        assert!(text.contains("vramtest-no-such-library"), "{text}");
    }

    #[test]
    fn a_library_of_another_major_version_is_named_with_a_hint() {
        let lookup = Lookup::OtherVersion {
            name: "libcupti.so.13".into(),
            bindings: (12, 8),
        };
        let text = lookup.problem("CUPTI library").unwrap();
        assert!(text.contains("only libcupti.so.13 is here"), "{text}");
        assert!(text.contains("CUDA 12.8"), "{text}");
        assert!(text.contains("cuda-version-default"), "{text}");
    }

    #[test]
    fn no_driver_library_is_named() {
        let err = probe_driver_with(&["libvramtest-no-cuda.so.1"], (12, 8)).unwrap_err();
        assert_eq!(
            err,
            Unavailable::NoLibrary {
                tried: vec!["libvramtest-no-cuda.so.1".into()]
            }
        );
        assert!(
            err.to_string().starts_with("no CUDA driver: libcuda"),
            "{err}"
        );
    }

    #[test]
    fn every_reason_says_what_is_missing() {
        let cases: [(Unavailable, &str); 5] = [
            (
                Unavailable::NoLibrary {
                    tried: vec!["libcuda.so.1".into()],
                },
                "no CUDA driver",
            ),
            (
                Unavailable::StubLibrary {
                    library: "libcuda.so".into(),
                },
                "stub library",
            ),
            (Unavailable::NoDevice, "no CUDA device"),
            (
                Unavailable::DriverTooOld {
                    driver: (12, 4),
                    bindings: (12, 8),
                },
                "driver too old: it supports CUDA 12.4, the driver bindings are CUDA 12.8",
            ),
            (
                Unavailable::DriverFailed {
                    call: "cuInit",
                    code: 999,
                },
                "cuInit failed with CUresult 999",
            ),
        ];
        for (err, needle) in cases {
            let text = err.to_string();
            assert!(text.contains(needle), "{text} lacks {needle}");
        }
    }

    /// Builds a fake libcuda whose `cuInit`, `cuDriverGetVersion` and
    /// `cuDeviceGetCount` answer as given, with the C compiler. `None` where `cc` does
    /// not run: said on stderr, or a failure where `VRAMTEST_REQUIRE_CC` is set (as in
    /// CI, which requires every tool a test needs).
    fn fake_libcuda(name: &str, init: i32, version: i32, count: i32) -> Option<String> {
        let dir = std::env::temp_dir().join(format!("vramtest-fake-cuda-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let c = dir.join(format!("{name}.c"));
        let so = dir.join(format!("{name}.so"));
        std::fs::write(
            &c,
            format!(
                "int cuInit(unsigned f) {{ (void)f; return {init}; }}\n\
                 int cuDriverGetVersion(int *v) {{ *v = {version}; return 0; }}\n\
                 int cuDeviceGetCount(int *n) {{ *n = {count}; return 0; }}\n"
            ),
        )
        .unwrap();
        let built = match std::process::Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&so)
            .arg(&c)
            .status()
        {
            Ok(status) => status,
            Err(e) => {
                assert!(
                    std::env::var_os("VRAMTEST_REQUIRE_CC").is_none(),
                    "cc: cannot run it ({e}); VRAMTEST_REQUIRE_CC is set, so the fake libcuda cases must run"
                );
                // Past the harness's capture, so `cargo test` shows it.
                let line = format!("skipped the fake libcuda cases: cc: cannot run it ({e})\n");
                let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
                return None;
            }
        };
        assert!(built.success(), "cc did not build {}", c.display());
        Some(so.display().to_string())
    }

    /// What each kind of libcuda makes of the probe: the toolkit's stub (cuInit says
    /// CUDA_ERROR_STUB_LIBRARY), no device, a driver older than the bindings, a working
    /// one. Needs a C compiler; says what it skipped without one (fails in CI).
    #[test]
    fn each_kind_of_libcuda_is_named() {
        type Case = (&'static str, i32, i32, i32, Result<usize, Unavailable>);
        let cases: [Case; 5] = [
            (
                "stub",
                34,
                12080,
                1,
                Err(Unavailable::StubLibrary {
                    library: String::new(),
                }),
            ),
            ("nodevice", 100, 12080, 0, Err(Unavailable::NoDevice)),
            ("zero", 0, 12080, 0, Err(Unavailable::NoDevice)),
            (
                "old",
                0,
                12020,
                1,
                Err(Unavailable::DriverTooOld {
                    driver: (12, 2),
                    bindings: (12, 8),
                }),
            ),
            ("ok", 0, 13000, 2, Ok(2)),
        ];
        for (name, init, version, count, expected) in cases {
            let Some(path) = fake_libcuda(name, init, version, count) else {
                return;
            };
            let got = probe_driver_with(&[path.as_str()], (12, 8)).map(|p| p.devices);
            let expected = expected.map_err(|e| match e {
                Unavailable::StubLibrary { .. } => Unavailable::StubLibrary {
                    library: path.clone(),
                },
                other => other,
            });
            assert_eq!(got, expected, "{name}");
        }
    }

    #[test]
    fn the_bindings_version_is_a_cuda_version() {
        let (major, minor) = bindings_version();
        assert!((11..=13).contains(&major), "{major}.{minor}");
        assert!(minor < 10);
    }
}
