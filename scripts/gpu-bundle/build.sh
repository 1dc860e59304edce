#!/usr/bin/env bash
# Builds the GPU bundle: a self-contained folder for a GPU machine without Rust or
# network (see scripts/gpu-check.sh). Here: Rust, python3 with venv, a C compiler and
# (the first time) the Python package index; no GPU.
#
#   scripts/gpu-check.sh bundle DIR
#
# DIR gets: bin.tar.gz (stripped release test binaries: vramtest-cuda's unit tests with and
# without CUPTI, the pool-semantics probe, cudarc-mlp's library and vram tests,
# candle-mlp's vram test with candle's `cuda` feature), src/ (the fixtures' manifests
# and committed snapshots), run.sh, table.py, calibration.py, bundle.env. Everything is built with
# CUDA 13.0 bindings and kernels for compute capability 9.0 (H100/H200).
#
# Environment: BUNDLE_BUILD_ROOT (default /tmp/vramtest-gpu-bundle/repo): the path the
# sources are built from; run.sh recreates it on the GPU machine, since the test
# binaries find their crate's snapshots at the path they were compiled at.
# CUDA_COMPUTE_CAP (default 90). GPU_BUNDLE_VENV, GPU_BUNDLE_STUBS: where the toolkit
# wheels and the stub driver go (default target/gpu-venv, target/gpu-stubs).

set -euo pipefail
DIR=${1:?usage: scripts/gpu-check.sh bundle DIR}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD_ROOT=${BUNDLE_BUILD_ROOT:-/tmp/vramtest-gpu-bundle/repo}
LIMIT_MIB=64
started=$(date +%s)

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)

# 1. The toolkit (nvcc and the CUDA 13.0 libraries from NVIDIA's wheels, a stub libcuda).
# shellcheck source=/dev/null
# (toolkit.sh checks every step itself and says what failed.)
. "$HERE/toolkit.sh" "${GPU_BUNDLE_VENV:-$ROOT/target/gpu-venv}" "${GPU_BUNDLE_STUBS:-$ROOT/target/gpu-stubs}" ||
    { echo "gpu-bundle: no CUDA toolkit, no bundle" >&2; exit 1; }
echo "toolkit: $(nvcc --version | tail -n 2 | head -n 1)"

# 2. The sources, at the path the binaries will look for them (tracked and untracked
# files that git does not ignore).
rm -rf "$BUILD_ROOT"
mkdir -p "$BUILD_ROOT"
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard) |
    (cd "$ROOT" && xargs -0 tar -cf - --no-recursion 2>/dev/null) |
    tar -xf - -C "$BUILD_ROOT"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target/gpu-bundle}
# The build logs go there before cargo has made it.
mkdir -p "$CARGO_TARGET_DIR"
export CARGO_TERM_COLOR=never
cd "$BUILD_ROOT"

executables() { # the test/example executables of a cargo build's JSON messages
    python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        print(m["target"]["name"], m["target"]["kind"][0], m["executable"])
'
}

build() { # build LABEL CARGO-ARGS...: a release build, its executables on stdout
    local label=$1
    shift
    local t0
    t0=$(date +%s)
    echo "==> build $label" >&2
    cargo "$@" --release --message-format=json-render-diagnostics >"$CARGO_TARGET_DIR/bundle-$label.json" || {
        echo "gpu-bundle: building $label failed" >&2
        return 1
    }
    echo "    ${label}: $(($(date +%s) - t0))s" >&2
    executables <"$CARGO_TARGET_DIR/bundle-$label.json"
}

pick() { # pick NAME KIND < executables: the path of one executable
    awk -v n="$1" -v k="$2" '$1 == n && $2 == k { print $3 }' | tail -n 1
}

rm -rf "${DIR:?}/bin" "${DIR:?}/bin.tar.gz" "${DIR:?}/src" "${DIR:?}/out"
mkdir -p "$DIR/bin" "$DIR/src"
CUDA13=cudarc/cuda-13000
exe=$(build vramtest-cuda test -p vramtest-cuda --lib --no-run --no-default-features --features "$CUDA13")
cp "$(pick vramtest_cuda lib <<<"$exe")" "$DIR/bin/vramtest-cuda-tests"
exe=$(build vramtest-cuda-cupti test -p vramtest-cuda --lib --no-run --no-default-features --features "cupti,$CUDA13")
cp "$(pick vramtest_cuda lib <<<"$exe")" "$DIR/bin/vramtest-cuda-tests-cupti"
exe=$(build pool-semantics build -p vramtest-cuda --example pool_semantics --no-default-features --features "cupti,$CUDA13")
cp "$(pick pool_semantics example <<<"$exe")" "$DIR/bin/pool_semantics"
exe=$(build cudarc-mlp test --manifest-path fixtures/cudarc-mlp/Cargo.toml --lib --test vram --no-run --no-default-features --features cuda-13000)
cp "$(pick cudarc_mlp lib <<<"$exe")" "$DIR/bin/cudarc-mlp-lib"
cp "$(pick vram test <<<"$exe")" "$DIR/bin/cudarc-mlp-vram"
# candle's `cuda` feature: its kernels are compiled by nvcc 13.0 here, and its cudarc
# takes nvcc's version (vramtest's own default version is off: --no-default-features).
exe=$(build candle-mlp test --manifest-path fixtures/candle-mlp/Cargo.toml --test vram --no-run --no-default-features --features cuda)
cp "$(pick vram test <<<"$exe")" "$DIR/bin/candle-mlp-vram"
strip "$DIR"/bin/*
# Compressed (candle's kernels make its binary large); run.sh unpacks them with python3.
tar -C "$DIR" -czf "$DIR/bin.tar.gz" bin
rm -rf "${DIR:?}/bin"

# 3. What the binaries read at run time: the fixtures' manifests and committed snapshots.
for crate in cudarc-mlp candle-mlp; do
    mkdir -p "$DIR/src/fixtures/$crate/tests/snapshots"
    cp "fixtures/$crate/Cargo.toml" "$DIR/src/fixtures/$crate/"
    cp fixtures/"$crate"/tests/snapshots/*.snap "$DIR/src/fixtures/$crate/tests/snapshots/" 2>/dev/null || true
done
mkdir -p "$DIR/src/vramtest-cuda"
cp "$HERE/run.sh" "$HERE/table.py" "$HERE/calibration.py" "$DIR/"
chmod +x "$DIR/run.sh"
{
    echo "# Written by scripts/gpu-check.sh bundle."
    printf 'BUILD_ROOT=%q\n' "$BUILD_ROOT"
    # The kernels (nvcc 13.0), cudarc's bindings (cuda-13000) and the libraries they
    # load (libcublas.so.13, ...) are CUDA 13.0's: run.sh refuses an older driver.
    echo "CUDA_NEEDED=13.0"
} >"$DIR/bundle.env"
{
    echo "vramtest GPU bundle"
    echo "commit: $(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "toolkit: $(nvcc --version | tail -n 2 | head -n 1); CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP"
    echo "rustc: $(rustc --version)"
    echo "run: ./run.sh (bash, coreutils, python3; an NVIDIA driver for CUDA 13.0 or newer, 580+; CUDA 13 libraries)"
} >"$DIR/MANIFEST"

size_kib=$(du -sk "$DIR" | cut -f1)
echo "bundle: $DIR, $((size_kib / 1024)) MiB ($size_kib KiB), built in $(($(date +%s) - started))s"
tar -tvzf "$DIR/bin.tar.gz" | awk '{ printf "  %12d B  %s (uncompressed)\n", $3, $6 }'

if [ "$size_kib" -gt $((LIMIT_MIB * 1024)) ]; then
    echo "gpu-bundle: the bundle is over $LIMIT_MIB MiB" >&2
    exit 1
fi
