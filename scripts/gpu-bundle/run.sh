#!/usr/bin/env bash
# Runs vramtest's GPU checks from a prepared bundle (scripts/gpu-check.sh bundle DIR):
# needs bash, coreutils and python3 only; no cargo, no network.
#
#   DIR/run.sh
#
# Checks the NVIDIA driver (libcuda, under the names the tests' loader tries, of the
# CUDA version the bundle was built for or newer), finds the CUDA 13 libraries
# (LD_LIBRARY_PATH, /usr/local/cuda*, or the nvidia/cu13/lib folder of a Python
# environment with NVIDIA's wheels: PYTHON=/path/to/python picks the environment,
# default python3), refusing to start without one it needs, then runs every GPU
# test with VRAMTEST_DEVICE=cuda and VRAMTEST_UPDATE=new, prints one table per test, the
# calibration of the pool model (candle-mlp's tests on the CPU predict what their CUDA
# runs allocate and reserve: calibration.py) and collects the `@cuda` .snap.new files
# under DIR/out/ (same paths as in the repository; the reports under DIR/out/reports/).
#
# Environment: STEP_TIMEOUT (seconds per step, default 300), PYTHON.
# Exit status: 0 when every step ran and every GPU test left a CUDA snapshot; 1 when a
# step failed; 2, with one `run.sh: ...` line, when there is no usable driver or
# device, the driver is older than the bundle's CUDA version, or a library is missing.

set -uo pipefail
DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PYTHON=${PYTHON:-python3}
STEP_TIMEOUT=${STEP_TIMEOUT:-300}
# shellcheck source=/dev/null
. "$DIR/bundle.env" # BUILD_ROOT: where the test binaries look for their crates; CUDA_NEEDED

OUT=$DIR/out
LOGS=$OUT/logs
rm -rf "$OUT"
mkdir -p "$LOGS"
started=$(date +%s)

# 1. Where the CUDA libraries the tests load are: the folders on LD_LIBRARY_PATH, under
# /usr/local/cuda*, and the nvidia/cu13/lib folder of PYTHON's environment (the
# driver check below and the tests run with all of them on LD_LIBRARY_PATH).
lib_dirs=()
IFS=: read -r -a from_env <<<"${LD_LIBRARY_PATH:-}"
lib_dirs+=("${from_env[@]}")
for d in /usr/local/cuda*/lib64 /usr/local/cuda*/extras/CUPTI/lib64 /usr/local/cuda*/targets/x86_64-linux/lib; do
    [ -d "$d" ] && lib_dirs+=("$d")
done
wheel_lib=$("$PYTHON" - <<'PY' 2>/dev/null
import os
try:
    import nvidia
except ImportError:
    raise SystemExit(0)
for base in list(nvidia.__path__):
    lib = os.path.join(base, "cu13", "lib")
    if os.path.isdir(lib):
        print(lib)
        break
PY
)
[ -n "$wheel_lib" ] && lib_dirs+=("$wheel_lib")
found=()
for d in "${lib_dirs[@]}"; do
    [ -n "$d" ] && [ -d "$d" ] && found+=("$d")
done
LD_LIBRARY_PATH=$(IFS=:; echo "${found[*]}")
export LD_LIBRARY_PATH
# 2. The driver: libcuda under the names cudarc's loader tries, in its order (a CUDA
# toolkit's stubs/libcuda.so before the driver's libcuda.so.1 is what the tests would
# load), cuInit succeeds, the driver supports the CUDA version this bundle was built
# for (CUDA_NEEDED in bundle.env: its kernels and libraries are that version's), a
# device is there.
if ! CUDA_NEEDED=${CUDA_NEEDED:-13.0} "$PYTHON" - <<'PY'
import ctypes, os, sys
needed = tuple(int(x) for x in os.environ["CUDA_NEEDED"].split("."))
names = ["libcuda.so", "libcuda.so." + str(needed[0]), "libcuda.so.12", "libcuda.so.1"]
cuda = name = None
for n in names:
    try:
        cuda, name = ctypes.CDLL(n), n
        break
    except OSError:
        pass
if cuda is None:
    print(f"run.sh: no CUDA driver: libcuda could not be loaded (tried {', '.join(names)}); "
          "install the NVIDIA driver or add its folder to LD_LIBRARY_PATH", file=sys.stderr)
    sys.exit(2)
rc = cuda.cuInit(0)
if rc == 34:
    print(f"run.sh: no CUDA driver: {name} is the CUDA toolkit's stub library, found before "
          "the driver's libcuda.so.1; remove the toolkit's stubs folder from LD_LIBRARY_PATH",
          file=sys.stderr)
    sys.exit(2)
if rc != 0:
    print(f"run.sh: no CUDA driver: cuInit failed with CUresult {rc}", file=sys.stderr)
    sys.exit(2)
v, n = ctypes.c_int(), ctypes.c_int()
cuda.cuDriverGetVersion(ctypes.byref(v))
found = (v.value // 1000, v.value % 1000 // 10)
if found < needed:
    print(f"run.sh: CUDA driver too old: it supports CUDA {found[0]}.{found[1]}, this bundle "
          f"needs CUDA {needed[0]}.{needed[1]} (its kernels and libraries are CUDA "
          f"{needed[0]}.{needed[1]} builds; update the NVIDIA driver)", file=sys.stderr)
    sys.exit(2)
cuda.cuDeviceGetCount(ctypes.byref(n))
if n.value < 1:
    print("run.sh: no CUDA device", file=sys.stderr)
    sys.exit(2)
print(f"driver: CUDA {found[0]}.{found[1]} ({name}), {n.value} device(s)")
PY
then
    exit 2
fi

# 3. The CUDA libraries. Needed by cudarc-mlp and candle-mlp: cuBLAS, NVRTC for the
# kernels, cuRAND, and the runtime (candle's binary links libcudart.so.13 and cannot
# start without it); libcupti is optional (without it the CUPTI steps measure by
# watermarks).
missing=()
for lib in libcublas.so.13 libcublasLt.so.13 libnvrtc.so.13 libcurand.so.10 libcudart.so.13 libcupti.so.13; do
    hit=""
    for d in "${found[@]}"; do
        if [ -e "$d/$lib" ]; then hit="$d/$lib"; break; fi
    done
    case "$lib" in
        libcupti.*) printf 'library %-20s %s\n' "$lib" "${hit:-not found (optional)}" ;;
        *)
            printf 'library %-20s %s\n' "$lib" "${hit:-NOT FOUND}"
            [ -z "$hit" ] && missing+=("$lib")
            ;;
    esac
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "run.sh: missing CUDA libraries: ${missing[*]} (searched LD_LIBRARY_PATH, /usr/local/cuda*, and the nvidia/cu13/lib folder of $PYTHON's environment); pip install nvidia-cublas nvidia-cuda-nvrtc nvidia-curand nvidia-cuda-runtime (CUDA 13) and set PYTHON to that environment's python, or add the libraries' folder to LD_LIBRARY_PATH" >&2
    exit 2
fi
command -v nvidia-smi >/dev/null 2>&1 &&
    nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader | sed 's/^/GPU: /'

# 4. The crates' manifests and committed snapshots where the binaries look for them.
rm -rf "$BUILD_ROOT"
mkdir -p "$BUILD_ROOT"
cp -R "$DIR/src/." "$BUILD_ROOT/"

export VRAMTEST_DEVICE=cuda VRAMTEST_UPDATE=new
unset CI TF_BUILD VRAMTEST_CHECK
failed=0
step() { # step NAME DIR CMD...: runs CMD in DIR with a timeout, logs it, prints its status
    local name=$1 cwd=$2
    shift 2
    local t0 rc
    t0=$(date +%s)
    printf '==> %-32s ' "$name"
    (cd "$cwd" && timeout "$STEP_TIMEOUT" "$@") >"$LOGS/$name.log" 2>&1
    rc=$?
    printf '(rc %s, %ss)\n' "$rc" "$(($(date +%s) - t0))"
    if [ "$rc" -ne 0 ]; then
        tail -n 25 "$LOGS/$name.log" | sed 's/^/    /'
    fi
    return "$rc"
}

B=$DIR/bin
if [ ! -d "$B" ]; then
    "$PYTHON" - "$DIR/bin.tar.gz" "$DIR" <<'PY' || exit 1
import sys, tarfile
extra = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
with tarfile.open(sys.argv[1]) as t:
    t.extractall(sys.argv[2], **extra)
PY
fi
step vramtest-cuda "$BUILD_ROOT/vramtest-cuda" "$B/vramtest-cuda-tests" --test-threads=1 || failed=1
step vramtest-cuda-cupti "$BUILD_ROOT/vramtest-cuda" "$B/vramtest-cuda-tests-cupti" --test-threads=1 --include-ignored || failed=1
step pool-semantics "$BUILD_ROOT" "$B/pool_semantics" || failed=1
step cudarc-mlp-lib "$BUILD_ROOT/fixtures/cudarc-mlp" "$B/cudarc-mlp-lib" --test-threads=1 || failed=1
# A vram test exits non-zero while its CUDA snapshot is new (pending): the table below
# judges these steps by the snapshots they leave.
step cudarc-mlp-vram "$BUILD_ROOT/fixtures/cudarc-mlp" "$B/cudarc-mlp-vram" --nocapture
REPORTS=$OUT/reports
mkdir -p "$REPORTS/cuda" "$REPORTS/cpu"
step candle-mlp-vram "$BUILD_ROOT/fixtures/candle-mlp" env VRAMTEST_REPORT_DIR="$REPORTS/cuda" "$B/candle-mlp-vram" --nocapture
# The same tests on the CPU: their allocations replayed through the pool model predict
# what the GPU run above allocated and reserved (the calibration table below). This
# machine's CPU caches may differ from those the CPU snapshots were taken on, so the
# step is judged by the reports it leaves, not its exit status.
step candle-mlp-vram-cpu "$BUILD_ROOT/fixtures/candle-mlp" env VRAMTEST_DEVICE=cpu VRAMTEST_UPDATE=no VRAMTEST_REPORT_DIR="$REPORTS/cpu" "$B/candle-mlp-vram" --nocapture

echo
echo "pool semantics (raw cudarc on one stream):"
grep -E '^(device|used_high|reserved|cupti|alignment|granule|constants|cublas)' "$LOGS/pool-semantics.log" | sed 's/^/  /'

"$PYTHON" "$DIR/table.py" "$BUILD_ROOT" "$LOGS" || failed=1
echo
"$PYTHON" "$DIR/calibration.py" "$REPORTS/cpu" "$REPORTS/cuda" || failed=1

# 5. The @cuda snapshots to commit, at their repository paths.
(cd "$BUILD_ROOT" && find fixtures -name '*@cuda.snap.new' -print) | while read -r f; do
    mkdir -p "$OUT/$(dirname "$f")"
    cp "$BUILD_ROOT/$f" "$OUT/$f"
    echo "collected $f"
done
echo
echo "run.sh: $(($(date +%s) - started))s; logs and snapshots in $OUT"
exit "$failed"
