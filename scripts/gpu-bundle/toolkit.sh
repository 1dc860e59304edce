#!/usr/bin/env bash
# Build-time CUDA 13.0 toolkit for a machine without one (and without a GPU): nvcc,
# headers and libraries from NVIDIA's Python wheels in a virtualenv, plus a stub
# libcuda.so.1 for `dynamic-linking` to link against (the driver is never loaded here;
# on the GPU machine the real libcuda.so.1 is found by its SONAME).
#
#   source scripts/gpu-bundle/toolkit.sh VENV_DIR STUB_DIR
#
# Exports CUDA_HOME, CUDA_PATH, PATH, CUDA_COMPUTE_CAP (kept when set; else 90: H100/H200) and
# CUDARC_TOOLKIT_LIB (the wheel's library folder). Needs python3 with venv (or
# GPU_BUNDLE_PYTHON), a C compiler, cargo, and the Python package index (or a local
# mirror of it, PIP_INDEX_URL) the first time. Works in a brand-new VENV_DIR and under
# `set -euo pipefail`; every failure prints one `gpu-bundle: ...` line saying what is
# missing and returns 1.

gpu_toolkit() {
    local venv=$1 stubs=$2
    local here
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd) || return 1
    # Pinned to the CUDA 13.0 releases: PTX from a newer nvcc does not load on a 13.0
    # driver (driver 580). nvidia-nvvm is pinned too: nvcc's wheel asks for any version.
    # nvidia-cuda-cccl holds libcu++ (`nv/target`), which the CUDA 13 headers include.
    local wheels=(
        nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88
        nvidia-cuda-runtime==13.0.96 nvidia-cuda-nvrtc==13.0.88
        nvidia-cuda-cccl==13.0.85 nvidia-cublas==13.0.2.14 nvidia-curand==10.4.0.35
    )
    local python=${GPU_BUNDLE_PYTHON:-python3}
    if [ ! -x "$venv/bin/python" ]; then
        if ! "$python" -m venv "$venv"; then
            echo "gpu-bundle: cannot create the virtualenv $venv with '$python -m venv' (on Debian/Ubuntu: apt-get install python3-venv)" >&2
            return 1
        fi
    fi
    # Where the wheels put CUDA 13 (nvidia/cu13), empty while they are not installed:
    # a new virtualenv has no `nvidia` package yet, which is not an error here.
    local find_cu13='import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))'
    local cu13
    cu13=$("$venv/bin/python" -c "$find_cu13" 2>/dev/null) || cu13=""
    if [ -z "$cu13" ] || ! "$cu13/bin/nvcc" --version 2>/dev/null | grep -q 'release 13\.0'; then
        echo "gpu-bundle: installing the CUDA 13.0 wheels into $venv" >&2
        if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${wheels[@]}"; then
            echo "gpu-bundle: pip could not install ${wheels[*]} into $venv (is the Python package index reachable? PIP_INDEX_URL names a mirror)" >&2
            return 1
        fi
        cu13=$("$venv/bin/python" -c "$find_cu13" 2>/dev/null) || cu13=""
        if [ -z "$cu13" ] || ! "$cu13/bin/nvcc" --version 2>/dev/null | grep -q 'release 13\.0'; then
            echo "gpu-bundle: the wheels are installed in $venv, but nvcc 13.0 is not at ${cu13:-<no nvidia package>}/bin/nvcc" >&2
            return 1
        fi
    fi

    # The stub driver: only the linker sees it.
    bash "$here/stub-libcuda.sh" "$stubs/lib" || return 1
    # Unversioned names for the linker (the wheels ship only the SONAME files).
    local so
    for so in libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libnvrtc.so.13 libcudart.so.13; do
        if [ ! -e "$cu13/lib/$so" ]; then
            echo "gpu-bundle: $so is missing from $cu13/lib (the wheels of ${wheels[*]})" >&2
            return 1
        fi
        ln -sf "$cu13/lib/$so" "$stubs/lib/${so%.so.*}.so" || return 1
    done

    export CUDA_HOME=$cu13 CUDA_PATH=$stubs PATH=$cu13/bin:$PATH
    export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90}
    export CUDARC_TOOLKIT_LIB=$cu13/lib
}

gpu_toolkit "$@"
