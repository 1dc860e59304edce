//! Finding the driver and the CUDA libraries without cudarc's loader.
//!
//! cudarc's own presence checks (`is_culib_present`) exist only when cudarc is built
//! with dynamic loading, and another crate in the same build may turn on
//! `dynamic-linking` instead (candle's `cuda` feature does). So the probe opens the
//! libraries itself, with `libloading`, under the names each CUDA major version gives
//! them (`libcuda.so.1`; `libcublas.so.13` and `.12`; …), and asks the driver the three
//! questions that decide whether tests can run (`cuInit`, `cuDeviceGetCount`,
//! `cuDriverGetVersion`) through symbols it looked up itself: no call here can panic.
//!
//! **One library for both.** The probe must ask the very library cudarc's calls will
//! reach, or it can report a driver while cudarc loads the toolkit's stub (a CUDA
//! container's `lib64/stubs` on `LD_LIBRARY_PATH` holds `libcuda.so`, which cudarc's
//! loader tries before `libcuda.so.1`). So it tries libcuda under cudarc's candidate
//! names in cudarc's order ([`libcuda_candidates`]), except in a build that links
//! libcuda (`dynamic-linking`), where the process already has `libcuda.so.1` loaded
//! when the probe first runs and every call goes there.
//!
//! **Driver versions.** cudarc resolves each driver symbol when it is first called, so
//! a driver works when it exports the symbols the crates call, whatever CUDA version
//! the bindings were generated for: [`DRIVER_SYMBOLS`] lists them with the CUDA version
//! that introduced each, and [`oldest_driver`] is the newest of those (CUDA 11.2, the
//! stream-ordered memory pools).

use std::ffi::c_int;
use std::sync::OnceLock;

/// The name the NVIDIA driver installs its library under (its SONAME), which a build
/// that links libcuda (`dynamic-linking`) loads at start-up.
#[cfg(not(windows))]
pub const LIBCUDA_SONAME: &str = "libcuda.so.1";
/// The name of the driver library on Windows.
#[cfg(windows)]
pub const LIBCUDA_SONAME: &str = "nvcuda.dll";

/// The names cudarc 0.19's loader tries for libcuda, in its order
/// (`get_lib_name_candidates` for `cuda`, then for `nvcuda`), for bindings of CUDA
/// major version `major` and minor version `minor`. The first one that opens is the
/// library all of cudarc's driver calls go to: `libcuda.so` (the development link, and
/// the toolkit stub's name) comes before the driver's `libcuda.so.1`.
pub fn libcuda_candidates(major: u32, minor: u32) -> Vec<String> {
    use std::env::consts::{DLL_PREFIX, DLL_SUFFIX};
    let (p, s, w) = (DLL_PREFIX, DLL_SUFFIX, usize::BITS);
    ["cuda", "nvcuda"]
        .iter()
        .flat_map(|lib| {
            [
                format!("{p}{lib}{s}"),
                format!("{p}{lib}{w}{s}"),
                format!("{p}{lib}{w}_{major}{s}"),
                format!("{p}{lib}{w}_{major}{minor}{s}"),
                format!("{p}{lib}{w}_{major}{minor}_0{s}"),
                format!("{p}{lib}{w}_{major}0_{minor}{s}"),
                format!("{p}{lib}{w}_10{s}"),
                format!("{p}{lib}{w}_11{s}"),
                format!("{p}{lib}{w}_12{s}"),
                format!("{p}{lib}{w}_{major}0_0{s}"),
                format!("{p}{lib}{w}_9{s}"),
                format!("{p}{lib}{s}.{major}"),
                format!("{p}{lib}{s}.12"),
                format!("{p}{lib}{s}.11"),
                format!("{p}{lib}{s}.10"),
                format!("{p}{lib}{s}.9"),
                format!("{p}{lib}{s}.1"),
            ]
        })
        .collect()
}

/// The driver API functions vramtest's crates call (through cudarc, or looked up here),
/// each with the CUDA version that introduced it, from `cuda.h` and the CUDA Driver
/// API reference: the `_v2` names are what the headers map the plain name to since that
/// version (`cuMemGetInfo` → `cuMemGetInfo_v2` in 3.2, `cuDevicePrimaryCtxRelease` →
/// `_v2` in 11.0); the memory-pool calls came with the stream-ordered allocator (11.2).
pub const DRIVER_SYMBOLS: &[(&str, (u32, u32))] = &[
    ("cuInit", (2, 0)),
    ("cuDriverGetVersion", (2, 2)),
    ("cuDeviceGetCount", (2, 0)),
    ("cuDeviceGet", (2, 0)),
    ("cuDeviceGetName", (2, 0)),
    ("cuDeviceGetAttribute", (2, 0)),
    ("cuCtxSynchronize", (2, 0)),
    ("cuMemGetInfo_v2", (3, 2)),
    ("cuCtxGetCurrent", (4, 0)),
    ("cuCtxSetCurrent", (4, 0)),
    ("cuDevicePrimaryCtxRetain", (7, 0)),
    ("cuDevicePrimaryCtxRelease_v2", (11, 0)),
    ("cuDeviceGetMemPool", (11, 2)),
    ("cuMemPoolGetAttribute", (11, 2)),
    ("cuMemPoolSetAttribute", (11, 2)),
];

/// The oldest CUDA version a driver may support for vramtest's probe: the newest
/// version among [`DRIVER_SYMBOLS`] (11.2). The version the bindings were generated for
/// does not matter (cudarc resolves each symbol on its first call).
pub fn oldest_driver() -> (u32, u32) {
    DRIVER_SYMBOLS
        .iter()
        .map(|&(_, v)| v)
        .max()
        .unwrap_or((0, 0))
}

/// `CUDA_ERROR_STUB_LIBRARY`: `cuInit` of the toolkit's stub libcuda.
pub const CUDA_ERROR_STUB_LIBRARY: c_int = 34;
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
        names_tried(.tried)
    )]
    NoLibrary {
        /// Every library name tried, in order.
        tried: Vec<String>,
    },
    /// The library found is the CUDA toolkit's stub (`cuInit` says so), not a driver.
    #[error(
        "no CUDA driver: {library} is the CUDA toolkit's stub library, not a driver{} (hint: remove the toolkit's lib64/stubs folder from LD_LIBRARY_PATH, or install the NVIDIA driver)",
        .driver.as_ref().map(|d| format!(", and the loader finds it before the driver's {d}")).unwrap_or_default()
    )]
    StubLibrary {
        /// The library name that opened, with its file where the system says it
        /// (`libcuda.so (/usr/local/cuda/lib64/stubs/libcuda.so)`).
        library: String,
        /// A driver library found under a later name (`libcuda.so.1`), if one opens.
        driver: Option<String>,
    },
    /// A driver, but no device it can use.
    #[error("no CUDA device: the driver reports none (check CUDA_VISIBLE_DEVICES and nvidia-smi)")]
    NoDevice,
    /// The driver is older than a driver function the crates call (see
    /// [`DRIVER_SYMBOLS`]): it supports an older CUDA, or its library lacks the symbol.
    #[error(
        "CUDA driver too old: it supports CUDA {}.{}, vramtest needs CUDA {}.{} ({symbol}) (hint: update the NVIDIA driver)",
        .driver.0, .driver.1, .needed.0, .needed.1
    )]
    DriverTooOld {
        /// The CUDA version (major, minor) the driver supports.
        driver: (u32, u32),
        /// The CUDA version (major, minor) that introduced `symbol`.
        needed: (u32, u32),
        /// The driver function it lacks, the newest of those missing.
        symbol: &'static str,
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

/// The names tried, all of them when they are few; else the first, the driver's
/// SONAME, and how many others.
fn names_tried(tried: &[String]) -> String {
    if tried.len() <= 4 {
        return tried.join(", ");
    }
    let last = tried
        .iter()
        .find(|n| *n == LIBCUDA_SONAME)
        .unwrap_or(&tried[tried.len() - 1]);
    format!(
        "{}, {last} and {} other names cudarc's loader tries",
        tried[0],
        tried.len() - 2
    )
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

/// Whether the process had the driver's library loaded before the probe first ran: a
/// build that links libcuda (`dynamic-linking`), whose calls all go to that library.
/// Decided once, before the probe opens anything itself.
#[cfg(unix)]
fn libcuda_linked() -> bool {
    static LINKED: OnceLock<bool> = OnceLock::new();
    *LINKED.get_or_init(|| {
        // SAFETY: RTLD_NOLOAD only looks the library up among those already loaded (no
        // initializer runs); the handle is closed again, which leaves it loaded.
        unsafe {
            libloading::os::unix::Library::open(
                Some(LIBCUDA_SONAME),
                libc::RTLD_LAZY | libc::RTLD_NOLOAD,
            )
        }
        .is_ok()
    })
}

#[cfg(not(unix))]
fn libcuda_linked() -> bool {
    false
}

/// Opens libcuda as cudarc's calls will reach it (see the module documentation) and
/// asks it whether tests can run: `cuInit(0)`, `cuDriverGetVersion` (against
/// [`DRIVER_SYMBOLS`]), `cuDeviceGetCount`. Never panics.
pub fn probe_driver() -> Result<DriverProbe, Unavailable> {
    let names = if libcuda_linked() {
        vec![LIBCUDA_SONAME.to_owned()]
    } else {
        let (major, minor) = bindings_version();
        let mut names = libcuda_candidates(major, minor);
        // cudarc's list names `.so.12` twice for 12.x bindings: try each name once.
        let mut seen = std::collections::HashSet::new();
        names.retain(|n| seen.insert(n.clone()));
        names
    };
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    probe_driver_with(&names)
}

/// The file a symbol of a loaded library comes from, where the system says it.
#[cfg(unix)]
fn file_of(symbol: *const std::ffi::c_void) -> Option<String> {
    // SAFETY: dladdr only reads the loader's tables; `dli_fname` is a C string owned
    // by the loader, valid while the library stays loaded (it does: leaked below).
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(symbol, &mut info) == 0 || info.dli_fname.is_null() {
            return None;
        }
        Some(
            std::ffi::CStr::from_ptr(info.dli_fname)
                .to_string_lossy()
                .into_owned(),
        )
    }
}

#[cfg(not(unix))]
fn file_of(_symbol: *const std::ffi::c_void) -> Option<String> {
    None
}

/// [`probe_driver`] over the library names `names`, tried in order: the first that
/// opens is asked, as cudarc's loader does.
pub fn probe_driver_with(names: &[&str]) -> Result<DriverProbe, Unavailable> {
    let opened = names.iter().enumerate().find_map(|(i, name)| {
        // SAFETY: see `opens`; the library stays open for the symbol calls below and is
        // kept open afterwards (closing a driver library is never worth the risk).
        unsafe { libloading::Library::new(*name) }
            .ok()
            .map(|lib| (i, *name, lib))
    });
    let Some((index, name, lib)) = opened else {
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
                let file = file_of(*init as *const std::ffi::c_void);
                return Err(Unavailable::StubLibrary {
                    library: match file {
                        Some(file) if file != name => format!("{name} ({file})"),
                        _ => name.to_owned(),
                    },
                    // Which later name holds a library too (opened and closed, nothing called).
                    driver: names[index + 1..]
                        .iter()
                        .find(|n| opens(n))
                        .map(|n| (*n).to_owned()),
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
        let missing = DRIVER_SYMBOLS
            .iter()
            .filter(|&&(symbol, since)| {
                let mut c_name = symbol.as_bytes().to_vec();
                c_name.push(0);
                cuda_version < since || lib.get::<CuInit>(&c_name[..]).is_err()
            })
            .max_by_key(|&&(_, since)| since);
        if let Some(&(symbol, needed)) = missing {
            return Err(Unavailable::DriverTooOld {
                driver: cuda_version,
                needed,
                symbol,
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
    fn many_names_tried_are_summed_up() {
        let tried: Vec<String> = libcuda_candidates(12, 8);
        let text = Unavailable::NoLibrary { tried }.to_string();
        #[cfg(target_os = "linux")]
        assert!(
            text.contains(
                "(tried libcuda.so, libcuda.so.1 and 32 other names cudarc's loader tries;"
            ),
            "{text}"
        );
        assert!(text.len() < 250, "{text}");
    }

    #[test]
    fn no_driver_library_is_named() {
        let err = probe_driver_with(&["libvramtest-no-cuda.so.1"]).unwrap_err();
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
                    driver: Some("libcuda.so.1".into()),
                },
                "libcuda.so is the CUDA toolkit's stub library, not a driver, and the loader finds it before the driver's libcuda.so.1",
            ),
            (Unavailable::NoDevice, "no CUDA device"),
            (
                Unavailable::DriverTooOld {
                    driver: (11, 1),
                    needed: (11, 2),
                    symbol: "cuMemPoolGetAttribute",
                },
                "CUDA driver too old: it supports CUDA 11.1, vramtest needs CUDA 11.2 (cuMemPoolGetAttribute)",
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

    /// Builds a fake libcuda `name` in `dir` whose `cuInit`, `cuDriverGetVersion` and
    /// `cuDeviceGetCount` answer as given, and which exports every other function of
    /// [`DRIVER_SYMBOLS`] but `lacks`, with the C compiler (`None` without one).
    fn fake_libcuda(
        dir: &std::path::Path,
        name: &str,
        (init, version, count): (i32, i32, i32),
        lacks: &[&str],
    ) -> Option<String> {
        std::fs::create_dir_all(dir).ok()?;
        let c = dir.join(format!("{name}.c"));
        let so = dir.join(name);
        let mut text = format!(
            "int cuInit(unsigned f) {{ (void)f; return {init}; }}\n\
             int cuDriverGetVersion(int *v) {{ *v = {version}; return 0; }}\n\
             int cuDeviceGetCount(int *n) {{ *n = {count}; return 0; }}\n"
        );
        for (symbol, _) in DRIVER_SYMBOLS {
            let own = ["cuInit", "cuDriverGetVersion", "cuDeviceGetCount"];
            if !own.contains(symbol) && !lacks.contains(symbol) {
                text.push_str(&format!("int {symbol}(void) {{ return 0; }}\n"));
            }
        }
        std::fs::write(&c, text).ok()?;
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

    fn scratch(test: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("vramtest-fake-cuda-{}-{test}", std::process::id()))
    }

    /// What each kind of libcuda makes of the probe: the toolkit's stub (cuInit says
    /// CUDA_ERROR_STUB_LIBRARY), no device, drivers older than a function the crates
    /// call (by version, or lacking the symbol), drivers older than the bindings' CUDA
    /// version yet new enough, a working one. Needs a C compiler; says so and passes
    /// without one.
    #[test]
    fn each_kind_of_libcuda_is_named() {
        type Case = (
            &'static str,
            (i32, i32, i32),
            &'static [&'static str],
            Result<usize, Unavailable>,
        );
        let too_old = |driver, needed, symbol| {
            Err(Unavailable::DriverTooOld {
                driver,
                needed,
                symbol,
            })
        };
        let cases: [Case; 8] = [
            (
                "stub",
                (34, 12080, 1),
                &[],
                Err(Unavailable::StubLibrary {
                    library: String::new(),
                    driver: None,
                }),
            ),
            ("nodevice", (100, 12080, 0), &[], Err(Unavailable::NoDevice)),
            ("zero", (0, 12080, 0), &[], Err(Unavailable::NoDevice)),
            // CUDA 11.1: no stream-ordered memory pools yet.
            (
                "old",
                (0, 11010, 1),
                &[],
                too_old((11, 1), (11, 2), "cuMemPoolSetAttribute"),
            ),
            // Says 12.2 but lacks a symbol: named with the version that brought it.
            (
                "lacking",
                (0, 12020, 1),
                &["cuDevicePrimaryCtxRelease_v2"],
                too_old((12, 2), (11, 0), "cuDevicePrimaryCtxRelease_v2"),
            ),
            // Older than the bindings (12.8 or 13.0) but new enough for every symbol.
            ("cuda-12.4", (0, 12040, 1), &[], Ok(1)),
            ("cuda-11.2", (0, 11020, 3), &[], Ok(3)),
            ("ok", (0, 13000, 2), &[], Ok(2)),
        ];
        let dir = scratch("kinds");
        for (name, answers, lacks, expected) in cases {
            let Some(path) = fake_libcuda(&dir, &format!("{name}.so"), answers, lacks) else {
                eprintln!("no C compiler: the fake libcuda cases were not run");
                return;
            };
            let got = probe_driver_with(&[path.as_str()]).map(|p| p.devices);
            let expected = expected.map_err(|e| match e {
                Unavailable::StubLibrary { .. } => Unavailable::StubLibrary {
                    library: path.clone(),
                    driver: None,
                },
                other => other,
            });
            assert_eq!(got, expected, "{name}");
        }
    }

    /// A toolkit's stub (`libcuda.so`, cuInit → 34) beside a working driver
    /// (`libcuda.so.1`), the stub first as cudarc's loader tries them: the probe asks
    /// the stub, as cudarc would, and names both instead of reporting a driver that
    /// cudarc never reaches.
    #[test]
    fn a_stub_found_before_the_driver_is_named_with_it() {
        let dir = scratch("stub-first");
        let (Some(stub), Some(good)) = (
            fake_libcuda(&dir, "libcuda.so", (34, 13000, 1), &[]),
            fake_libcuda(&dir, "libcuda.so.1", (0, 13000, 1), &[]),
        ) else {
            eprintln!("no C compiler: the stub-beside-a-driver case was not run");
            return;
        };
        let err = probe_driver_with(&[stub.as_str(), good.as_str()]).unwrap_err();
        assert_eq!(
            err,
            Unavailable::StubLibrary {
                library: stub.clone(),
                driver: Some(good.clone()),
            }
        );
        let text = err.to_string();
        assert!(
            text.contains("and the loader finds it before the driver's")
                && text.contains("lib64/stubs folder from LD_LIBRARY_PATH"),
            "{text}"
        );
        // The driver alone is found.
        assert_eq!(probe_driver_with(&[good.as_str()]).unwrap().devices, 1);
    }

    /// The probe tries libcuda under cudarc's names in cudarc's order, so both open the
    /// same library: `libcuda.so` before `libcuda.so.1`.
    #[test]
    fn libcuda_is_tried_in_cudarc_order() {
        let (major, minor) = bindings_version();
        let ours = libcuda_candidates(major, minor);
        let mut cudarc = cudarc::get_lib_name_candidates("cuda");
        cudarc.extend(cudarc::get_lib_name_candidates("nvcuda"));
        assert_eq!(ours, cudarc);
        #[cfg(target_os = "linux")]
        {
            let at = |n: &str| ours.iter().position(|c| c == n).unwrap();
            assert!(at("libcuda.so") < at("libcuda.so.1"));
        }
    }

    /// The oldest driver is the newest symbol's version, and every cudarc call of the
    /// real driver (`cuda.rs`) is a function of the table: a new call fails here until
    /// its driver function (and the version that brought it) is added.
    #[test]
    fn the_oldest_driver_follows_the_symbols() {
        assert_eq!(oldest_driver(), (11, 2));
        // cudarc's `result` functions and the driver function each one calls (cudarc
        // 0.19's src/driver/result.rs).
        let calls = [
            ("init", "cuInit"),
            ("device::get_count", "cuDeviceGetCount"),
            ("device::get", "cuDeviceGet"),
            ("device::get_name", "cuDeviceGetName"),
            ("device::get_attribute", "cuDeviceGetAttribute"),
            ("device::get_mem_pool", "cuDeviceGetMemPool"),
            ("primary_ctx::retain", "cuDevicePrimaryCtxRetain"),
            ("primary_ctx::release", "cuDevicePrimaryCtxRelease_v2"),
            ("ctx::get_current", "cuCtxGetCurrent"),
            ("ctx::set_current", "cuCtxSetCurrent"),
            ("ctx::synchronize", "cuCtxSynchronize"),
            ("mem_get_info", "cuMemGetInfo_v2"),
            ("mem_pool::get_attribute", "cuMemPoolGetAttribute"),
            ("mem_pool::set_attribute", "cuMemPoolSetAttribute"),
        ];
        let source = include_str!("cuda.rs");
        let mut seen = 0;
        for (at, _) in source.match_indices("result::") {
            let path: String = source[at + "result::".len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let word_start = source[..at]
                .chars()
                .next_back()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
            if !word_start || path == "DriverError" {
                continue;
            }
            let symbol = calls
                .iter()
                .find(|(call, _)| *call == path)
                .map(|(_, symbol)| *symbol)
                .unwrap_or_else(|| panic!("result::{path}: which driver function is it?"));
            assert!(
                DRIVER_SYMBOLS.iter().any(|&(s, _)| s == symbol),
                "{symbol} (result::{path}) is not in DRIVER_SYMBOLS"
            );
            seen += 1;
        }
        assert!(seen >= calls.len(), "{seen} calls found in cuda.rs");
        // The one call made through `sys` directly.
        assert!(source.contains("sys::cuDriverGetVersion"));
        assert!(
            DRIVER_SYMBOLS
                .iter()
                .any(|&(s, _)| s == "cuDriverGetVersion")
        );
    }

    #[test]
    fn the_bindings_version_is_a_cuda_version() {
        let (major, minor) = bindings_version();
        assert!((11..=13).contains(&major), "{major}.{minor}");
        assert!(minor < 10);
    }
}
