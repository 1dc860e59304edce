#!/usr/bin/env bash
# vramtest beside every cudarc configuration another crate of a build may turn on:
# `cargo check` of fixtures/cudarc-compat once per combination (no CUDA toolkit, no
# nvcc, no driver needed). Run by .ci/run; all combinations share one target folder.
#
#   scripts/cudarc-compat.sh            # every combination
#   scripts/cudarc-compat.sh 3          # only the third (1-based), to reproduce one
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
)

only=${1:-}
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
