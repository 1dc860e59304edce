//! Where a CPU result was measured: the CPU's model, instruction set and cache sizes,
//! and the thread count. CPU-only memory (gemm's packing buffers) follows them, the
//! gated figures do not; a snapshot's `info` records them so that a comparison across
//! machines can say so.

use vramtest_model::snapshot::CpuFingerprint;

/// The fingerprint of this machine's CPU, with the measured process's thread count.
pub(super) fn fingerprint(threads: u32) -> CpuFingerprint {
    CpuFingerprint {
        cpu: model().unwrap_or_else(|| std::env::consts::ARCH.to_owned()),
        isa: isa().to_owned(),
        caches: caches().unwrap_or_else(|| "unknown".to_owned()),
        threads,
    }
}

/// The CPU's model name (`/proc/cpuinfo` on Linux).
fn model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find_map(|l| {
            let (key, value) = l.split_once(':')?;
            matches!(key.trim(), "model name" | "Model" | "cpu model" | "uarch")
                .then(|| value.split_whitespace().collect::<Vec<_>>().join(" "))
        })
        .filter(|m| !m.is_empty())
}

/// The widest SIMD instruction set gemm can use here: what sizes its packing buffers.
fn isa() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return "avx512";
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return "avx2";
        }
        "sse2"
    }
    #[cfg(target_arch = "aarch64")]
    {
        "neon"
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        std::env::consts::ARCH
    }
}

/// The data and unified caches of CPU 0 (`L1d 48 KiB, L2 2 MiB, L3 105 MiB`), from
/// Linux's sysfs.
fn caches() -> Option<String> {
    let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let mut found: Vec<(u32, String)> = Vec::new();
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let read = |name: &str| {
            std::fs::read_to_string(entry.path().join(name))
                .ok()
                .map(|s| s.trim().to_owned())
        };
        let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size"))
        else {
            continue;
        };
        let Ok(level) = level.parse::<u32>() else {
            continue;
        };
        let label = match (level, kind.as_str()) {
            (_, "Instruction") => continue,
            (1, "Data") => "L1d".to_owned(),
            (n, _) => format!("L{n}"),
        };
        let size = size
            .strip_suffix('K')
            .map_or(size.clone(), |k| format!("{k} KiB"));
        found.push((level, format!("{label} {size}")));
    }
    found.sort();
    (!found.is_empty()).then(|| {
        found
            .into_iter()
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(", ")
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_fingerprint_names_this_machine() {
        let f = super::fingerprint(2);
        assert_eq!(f.threads, 2);
        assert!(!f.cpu.is_empty());
        assert!(!f.isa.is_empty());
        #[cfg(target_os = "linux")]
        assert!(f.caches.contains("L1d") || f.caches == "unknown", "{f:?}");
    }
}
