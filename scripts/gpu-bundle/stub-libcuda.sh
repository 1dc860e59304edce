#!/usr/bin/env bash
# A stub driver library for linking, never for running: every cu* entry point cudarc's
# driver bindings name, each returning CUDA_ERROR_UNKNOWN (999), built as
# OUT_DIR/libcuda.so with the driver's SONAME (libcuda.so.1), plus the libcuda.so.1 link.
# Builds that turn on cudarc's `dynamic-linking` (candle's `cuda` feature) link against
# it; on a GPU machine the real libcuda.so.1 is found by its SONAME.
#
#   scripts/gpu-bundle/stub-libcuda.sh OUT_DIR [MANIFEST]
#
# MANIFEST (default: vramtest-cuda's) is a crate whose dependency graph holds cudarc
# 0.19: `cargo metadata` finds its sources (downloading them on a fresh machine).
# Needs cargo, python3 and a C compiler (cc). Prints nothing on success; on failure one
# line saying what is missing, exit status 1. Reuses a stub newer than the bindings.

stub_libcuda() {
    local out=$1 manifest=$2
    local meta bindings errors
    mkdir -p "$out" || return 1
    errors="$out/cargo-metadata.log"
    if ! meta=$(cargo metadata --format-version 1 --manifest-path "$manifest" 2>"$errors"); then
        tail -n 5 "$errors" >&2
        echo "gpu-bundle: cargo metadata failed for $manifest (is crates.io or a vendored registry reachable?)" >&2
        return 1
    fi
    bindings=$(printf '%s' "$meta" | python3 -c '
import json, os, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == "cudarc" and p["version"].startswith("0.19."):
        print(os.path.join(os.path.dirname(p["manifest_path"]), "src", "driver", "sys", "mod.rs"))
        break
') || bindings=""
    if [ -z "$bindings" ] || [ ! -s "$bindings" ]; then
        echo "gpu-bundle: cudarc 0.19's driver bindings are not in the dependency graph of $manifest" >&2
        return 1
    fi
    if [ -s "$out/libcuda.so" ] && [ "$out/libcuda.so" -nt "$bindings" ]; then
        return 0
    fi
    if ! command -v cc >/dev/null 2>&1; then
        echo "gpu-bundle: no C compiler (cc) to build the stub libcuda" >&2
        return 1
    fi
    grep -oE 'pub unsafe fn cu[A-Za-z0-9_]+' "$bindings" | awk '{print $NF}' | sort -u |
        awk '{printf "int %s(void) { return 999; }\n", $1}' >"$out/cuda_stub.c"
    if ! cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$out/libcuda.so.tmp" "$out/cuda_stub.c"; then
        echo "gpu-bundle: the stub libcuda does not compile ($out/cuda_stub.c)" >&2
        return 1
    fi
    mv -f "$out/libcuda.so.tmp" "$out/libcuda.so" && ln -sf libcuda.so "$out/libcuda.so.1"
}

stub_libcuda "${1:?usage: stub-libcuda.sh OUT_DIR [MANIFEST]}" \
    "${2:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/vramtest-cuda/Cargo.toml}"
