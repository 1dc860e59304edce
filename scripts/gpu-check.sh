#!/usr/bin/env bash
# GPU check: builds vramtest's CUDA path, runs the GPU tests on CUDA and prints one
# table per test comparing the CUDA snapshot with the CPU snapshot and the analytic
# figures.
#
#   scripts/gpu-check.sh              # from the repository root, on a machine with a GPU
#                                     # (needs Rust, crates.io or a carried registry, nvcc
#                                     # for candle's cuda feature)
#   scripts/gpu-check.sh bundle DIR   # here, without a GPU: builds DIR, a self-contained
#                                     # folder to copy to a GPU machine without Rust or
#                                     # network, and run there as DIR/run.sh
#                                     # (scripts/gpu-bundle/build.sh says what it holds)
#
# Environment:
#   CARGO_FLAGS      extra flags for every cargo call (e.g. "--offline" where the
#                    machine cannot reach crates.io and the registry was carried over)
#   CARGO_TARGET_DIR one shared target directory (default: target/gpu-check) so the
#                    fixtures reuse each other's builds
#   CUDARC_BINDINGS  the cudarc version feature of cudarc-mlp and the probe's tests
#                    (default: cuda-13000 when the driver supports CUDA 13, else
#                    cuda-12080): CUDA 13 bindings also find the CUDA 13 library names
#   SKIP_CANDLE=1    skip the candle fixture (its `cuda` feature needs nvcc)
#   STEP_TIMEOUT     seconds allowed per cargo step (default 150; the whole script is
#                    meant to stay under 5 minutes on a warm target directory)
#
# Exit status: 0 when every step ran (a pending new snapshot is not a failure here),
# 1 when a step failed, 2 when there is no GPU.

if [ "${1:-}" = bundle ]; then
    shift
    exec bash "$(dirname "$0")/gpu-bundle/build.sh" "$@"
fi

set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target/gpu-check}
export VRAMTEST_DEVICE=cuda
# Not CI: let the harness write pending `.snap.new` files instead of failing on a
# missing CUDA snapshot.
unset CI TF_BUILD
CARGO_FLAGS=${CARGO_FLAGS:-}
STEP_TIMEOUT=${STEP_TIMEOUT:-150}
LOG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
failed=0
started=$(date +%s)

step() { # step NAME CMD... : runs a step with a timeout, logs it, reports its status
    local name=$1
    shift
    local log="$LOG_DIR/$name.log"
    local t0
    t0=$(date +%s)
    printf '==> %-28s ' "$name"
    timeout "$STEP_TIMEOUT" "$@" >"$log" 2>&1
    local rc=$?
    printf '(rc %s, %ss)\n' "$rc" "$(($(date +%s) - t0))"
    if [ "$rc" -ne 0 ]; then
        tail -n 25 "$log" | sed 's/^/    /'
    fi
    return "$rc"
}

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu-check: no NVIDIA GPU here (nvidia-smi -L failed)" >&2
    exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/GPU: /'
command -v nvcc >/dev/null 2>&1 && nvcc --version | tail -n 1 | sed 's/^/nvcc: /'

if [ -z "${CUDARC_BINDINGS:-}" ]; then
    CUDARC_BINDINGS=cuda-12080
    nvidia-smi | grep -q 'CUDA Version: 1[3-9]' && CUDARC_BINDINGS=cuda-13000
fi
echo "cudarc bindings: $CUDARC_BINDINGS"

# 1. The CUDA probe itself: its unit tests open the real device on a GPU machine; then
# the CUPTI variant (per-allocation records).
# shellcheck disable=SC2086
step vramtest-cuda cargo test $CARGO_FLAGS -p vramtest-cuda --lib --no-default-features \
    --features "cudarc/$CUDARC_BINDINGS" -- --test-threads=1 || failed=1
# shellcheck disable=SC2086
step vramtest-cuda-cupti cargo test $CARGO_FLAGS -p vramtest-cuda --lib --no-default-features \
    --features "cupti,cudarc/$CUDARC_BINDINGS" -- --test-threads=1 || failed=1
# shellcheck disable=SC2086
step pool-semantics cargo run $CARGO_FLAGS -p vramtest-cuda --example pool_semantics \
    --no-default-features --features "cupti,cudarc/$CUDARC_BINDINGS" || failed=1
grep -E '^(used_high|reserved|cupti|alignment|granule|constants|cublas)' "$LOG_DIR/pool-semantics.log" | sed 's/^/    /'

# 2. The raw cudarc fixture: its library tests (training smoke test), then the vram tests.
MLP=fixtures/cudarc-mlp/Cargo.toml
# shellcheck disable=SC2086
step cudarc-mlp-lib cargo test $CARGO_FLAGS --manifest-path "$MLP" --lib \
    --no-default-features --features "$CUDARC_BINDINGS" || failed=1
# shellcheck disable=SC2086
step cudarc-mlp-vram cargo test $CARGO_FLAGS --manifest-path "$MLP" --test vram \
    --no-default-features --features "$CUDARC_BINDINGS" -- --nocapture

# 3. The candle fixture on CUDA (candle's cuda feature compiles its kernels with nvcc).
if [ -n "${SKIP_CANDLE:-}" ]; then
    echo "==> candle-mlp-vram              skipped (SKIP_CANDLE)"
elif ! command -v nvcc >/dev/null 2>&1; then
    echo "==> candle-mlp-vram              skipped (no nvcc: candle's cuda feature needs it)"
else
    # shellcheck disable=SC2086
    # Without vramtest's default cudarc version: candle's cudarc takes nvcc's.
    step candle-mlp-vram cargo test $CARGO_FLAGS --manifest-path fixtures/candle-mlp/Cargo.toml \
        --no-default-features --features cuda --test vram -- --nocapture
fi

# 4. The tables (one per test). A vram test exits non-zero when its CUDA snapshot is
# new (pending), so only a missing snapshot counts as a failure here.
python3 scripts/gpu-bundle/table.py "$ROOT" "$LOG_DIR" || failed=1

echo
echo "gpu-check: $(($(date +%s) - started))s, logs in $LOG_DIR"
exit "$failed"
