#!/usr/bin/env bash
# vramtest beside every cudarc configuration another crate of a build may turn on:
# `cargo check` of fixtures/cudarc-compat once per combination (no CUDA toolkit, no
# nvcc, no driver needed). Run by .ci/run; all combinations share one target folder.
#
#   scripts/cudarc-compat.sh            # every combination, then the link check
#   scripts/cudarc-compat.sh 3          # only the third (1-based), to reproduce one
#   scripts/cudarc-compat.sh link       # only the link check
#
# The link check: `cargo check` never links, so a configuration that links a library
# the machine may lack passes it. `link` builds examples/linked.rs with cudarc's
# `dynamic-linking` (what candle's `cuda` feature turns on) and vramtest's `cupti`,
# against a stub libcuda (scripts/gpu-bundle/stub-libcuda.sh; no toolkit, no libcupti
# here), checks with `readelf -d` that it needs libcuda.so.1 and not libcupti, and runs
# it: it must start without libcupti and say why there is no session.
#
# Each line: the features, then environment variables (KEY=VALUE) for the check.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR_COMPAT:-$PWD/target/cudarc-compat}
COMBINATIONS=(
    # vramtest alone, default features: its own cudarc version (cuda-12080).
    "vramtest-default"
    # Linking another crate picks, with any 12.x or 13.x version.
    "dynamic-linking,cuda-12080"
    "dynamic-loading,cuda-12060"
    "fallback-dynamic-loading,cuda-13000,cupti"
    "dynamic-linking,cuda-13000,cupti"
    # candle-core 0.11's exact `cuda` list beside vramtest's default version...
    "candle-cuda,vramtest-default"
    # ...and without it: the version from CUDARC_CUDA_VERSION (what nvcc would say).
    "candle-cuda CUDARC_CUDA_VERSION=12080"
    "candle-cuda,cupti CUDARC_CUDA_VERSION=13000"
    # candle-core 0.9 (cudarc 0.16, a crate apart): vramtest's default version for its
    # cudarc 0.19, or CUDARC_CUDA_VERSION for both (without either, cudarc 0.19's build
    # script stops: "Must specify one of the following features").
    "candle09-cuda,vramtest-default CUDARC_CUDA_VERSION=12080"
    "candle09-cuda CUDARC_CUDA_VERSION=12080"
)

link_check() {
    local stubs=$CARGO_TARGET_DIR/stub-cuda
    bash scripts/gpu-bundle/stub-libcuda.sh "$stubs/lib"
    printf -- '--> [link] features dynamic-linking,cuda-13000,cupti: cargo build, readelf -d, run\n'
    # cudarc's build script adds $CUDA_PATH/lib to the link search path.
    CUDA_PATH=$stubs cargo build --quiet --manifest-path fixtures/cudarc-compat/Cargo.toml \
        --example linked --features dynamic-linking,cuda-13000,cupti
    local exe=$CARGO_TARGET_DIR/debug/examples/linked needed out
    needed=$(readelf -d "$exe" | awk '/NEEDED/ { gsub(/[][]/, "", $NF); print $NF }')
    if ! grep -qx 'libcuda.so.1' <<<"$needed" || grep -q cupti <<<"$needed"; then
        printf 'cudarc-compat: %s needs:\n%s\n(want libcuda.so.1 and no libcupti)\n' "$exe" "$needed" >&2
        return 1
    fi
    # The stub's cuInit answers CUDA_ERROR_UNKNOWN (999): no session, no panic.
    out=$(LD_LIBRARY_PATH=$stubs/lib "$exe" 2>&1) || {
        printf 'cudarc-compat: %s failed to run:\n%s\n' "$exe" "$out" >&2
        return 1
    }
    if [ "$out" != "no session: no CUDA driver: cuInit failed with CUresult 999 (check nvidia-smi)" ]; then
        printf 'cudarc-compat: unexpected output of %s:\n%s\n' "$exe" "$out" >&2
        return 1
    fi
    echo "    needs $(tr '\n' ' ' <<<"$needed")- runs without libcupti: $out"
}

only=${1:-}
if [ "$only" = link ]; then
    link_check
    exit
fi
i=0
for combination in "${COMBINATIONS[@]}"; do
    i=$((i + 1))
    if [ -n "$only" ] && [ "$only" != "$i" ]; then
        continue
    fi
    read -r features envs <<<"$combination"
    printf -- '--> [%d] features %s %s\n' "$i" "$features" "${envs:-}"
    # shellcheck disable=SC2086
    env ${envs:-} cargo check --quiet --manifest-path fixtures/cudarc-compat/Cargo.toml \
        --features "$features"
done
if [ -z "$only" ]; then
    link_check
fi
