#!/usr/bin/env bash
# Build-time CUDA 13.0 toolkit for a machine without one (and without a GPU): nvcc,
# headers and libraries from NVIDIA's Python wheels in a virtualenv, plus a stub
# libcuda.so.1 for `dynamic-linking` to link against (the driver is never loaded here;
# on the GPU machine the real libcuda.so.1 is found by its SONAME).
#
#   source scripts/gpu-bundle/toolkit.sh VENV_DIR STUB_DIR
#
# Exports CUDA_HOME, CUDA_PATH, PATH, CUDA_COMPUTE_CAP (90: H100/H200) and
# CUDARC_TOOLKIT_LIB (the wheel's library folder). Needs python3 with venv, a C compiler,
# and the Python package index (or a local mirror of it) the first time.

gpu_toolkit() {
    local venv=$1 stubs=$2
    # Pinned to the CUDA 13.0 releases: PTX from a newer nvcc does not load on a 13.0
    # driver (driver 580). nvidia-nvvm is pinned too: nvcc's wheel asks for any version.
    # nvidia-cuda-cccl holds libcu++ (`nv/target`), which the CUDA 13 headers include.
    local wheels=(
        nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88
        nvidia-cuda-runtime==13.0.96 nvidia-cuda-nvrtc==13.0.88
        nvidia-cuda-cccl==13.0.85 nvidia-cublas==13.0.2.14 nvidia-curand==10.4.0.35
    )
    if [ ! -x "$venv/bin/python" ]; then
        python3 -m venv "$venv" || return 1
    fi
    local cu13
    cu13=$("$venv/bin/python" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))' 2>/dev/null)
    if [ -z "$cu13" ] || ! "$cu13/bin/nvcc" --version 2>/dev/null | grep -q 'release 13\.0'; then
        "$venv/bin/pip" install --quiet --disable-pip-version-check "${wheels[@]}" || return 1
        cu13=$("$venv/bin/python" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))') || return 1
    fi

    # The stub driver: every cu* entry point cudarc's driver bindings name, each
    # returning CUDA_ERROR_UNKNOWN (999). Only the linker sees it.
    mkdir -p "$stubs/lib"
    local bindings
    bindings=$(find "${CARGO_HOME:-$HOME/.cargo}"/registry/src -path '*/cudarc-0.19.*/src/driver/sys/mod.rs' 2>/dev/null | sort | tail -n 1)
    if [ -z "$bindings" ]; then
        echo "gpu-bundle: cudarc's sources are not in the cargo registry (run cargo fetch first)" >&2
        return 1
    fi
    if [ ! -s "$stubs/lib/libcuda.so" ] || [ "$bindings" -nt "$stubs/lib/libcuda.so" ]; then
        grep -oE 'pub unsafe fn cu[A-Za-z0-9_]+' "$bindings" | awk '{print $NF}' | sort -u |
            awk '{printf "int %s(void) { return 999; }\n", $1}' >"$stubs/cuda_stub.c"
        cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$stubs/lib/libcuda.so" "$stubs/cuda_stub.c" || return 1
        ln -sf libcuda.so "$stubs/lib/libcuda.so.1"
    fi
    # Unversioned names for the linker (the wheels ship only the SONAME files).
    local so
    for so in libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libnvrtc.so.13 libcudart.so.13; do
        ln -sf "$cu13/lib/$so" "$stubs/lib/${so%.so.*}.so"
    done

    export CUDA_HOME=$cu13 CUDA_PATH=$stubs PATH=$cu13/bin:$PATH CUDA_COMPUTE_CAP=90
    export CUDARC_TOOLKIT_LIB=$cu13/lib
}

gpu_toolkit "$@"
