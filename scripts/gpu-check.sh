#!/usr/bin/env bash
# GPU check: builds vramtest's CUDA path, runs the two GPU fixtures on CUDA and prints
# one table comparing their snapshots with the CPU snapshot and the analytic figures.
#
#   scripts/gpu-check.sh            # from the repository root, on a machine with a GPU
#
# Environment:
#   CARGO_FLAGS      extra flags for every cargo call (e.g. "--offline" where the
#                    machine cannot reach crates.io and the registry was carried over)
#   CARGO_TARGET_DIR one shared target directory (default: target/gpu-check) so the
#                    fixtures reuse each other's builds
#   SKIP_CANDLE=1    skip the candle fixture (its `cuda` feature needs nvcc)
#   STEP_TIMEOUT     seconds allowed per cargo step (default 150; the whole script is
#                    meant to stay under 5 minutes on a warm target directory)
#
# Exit status: 0 when every step ran (a pending new snapshot is not a failure here),
# 1 when a step failed, 2 when there is no GPU.

set -uo pipefail
cd "$(dirname "$0")/.."
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

# 1. The CUDA probe itself: its unit tests open the real device on a GPU machine.
# shellcheck disable=SC2086
step vramtest-cuda cargo test $CARGO_FLAGS -p vramtest-cuda || failed=1

# 2. The raw cudarc fixture: its library tests (training smoke test), then the vram test.
MLP=fixtures/cudarc-mlp/Cargo.toml
# shellcheck disable=SC2086
step cudarc-mlp-lib cargo test $CARGO_FLAGS --manifest-path "$MLP" --lib || failed=1
# shellcheck disable=SC2086
step cudarc-mlp-vram cargo test $CARGO_FLAGS --manifest-path "$MLP" --test vram -- --nocapture
cudarc_rc=$?

# 3. The candle fixture on CUDA (candle's cuda feature compiles its kernels with nvcc).
candle_rc=skipped
if [ -n "${SKIP_CANDLE:-}" ]; then
    echo "==> candle-mlp-vram              skipped (SKIP_CANDLE)"
elif ! command -v nvcc >/dev/null 2>&1; then
    echo "==> candle-mlp-vram              skipped (no nvcc: candle's cuda feature needs it)"
else
    # shellcheck disable=SC2086
    step candle-mlp-vram cargo test $CARGO_FLAGS --manifest-path fixtures/candle-mlp/Cargo.toml \
        --features cuda --test vram -- --nocapture
    candle_rc=$?
fi

# 4. The table. A vram test exits non-zero when its CUDA snapshot is new (pending), so
# only a missing result counts as a failure here.
python3 - "$LOG_DIR" "$cudarc_rc" "$candle_rc" <<'PY' || failed=1
import json, os, re, sys

log_dir, cudarc_rc, candle_rc = sys.argv[1], sys.argv[2], sys.argv[3]
CATS = ["parameters", "gradients", "optimizer_state", "activations", "inputs",
        "temporaries", "workspace", "untracked"]

def body(path):
    """The JSON body of an insta-style snapshot: what follows the second `---` line."""
    lines = open(path).read().splitlines()
    seps = [i for i, l in enumerate(lines) if l.strip() == "---"]
    if len(seps) < 2:
        raise ValueError(f"{path}: no `---` header")
    return json.loads("\n".join(lines[seps[1] + 1:]))

def snapshot(crate, test, device):
    """The newest of `<snap>.new` and `<snap>`, or None."""
    base = f"fixtures/{crate}/tests/snapshots/vram__{test}@{device}.snap"
    found = [p for p in (base + ".new", base) if os.path.exists(p)]
    if not found:
        return None, None
    path = max(found, key=os.path.getmtime)
    return path, body(path)

params = (784 * 512 + 512 + 512 * 10 + 10) * 4
analytic = {
    "parameters": params,
    "gradients": params,
    "optimizer_state": 2 * params,
    "inputs": 64 * 784 * 4 + 64 * 4,
    # cudarc-mlp's forward survivors: pre-activation and hidden (64x512), logits and
    # probabilities (64x10), the loss; candle keeps a different set.
    "activations": (2 * 64 * 512 + 2 * 64 * 10 + 1) * 4,
    "temporaries": None, "workspace": None, "untracked": None,
}

columns = [
    ("candle CPU", *snapshot("candle-mlp", "mlp_adamw", "cpu")),
    ("candle CUDA", *snapshot("candle-mlp", "mlp_adamw", "cuda")),
    ("cudarc CUDA", *snapshot("cudarc-mlp", "mlp_adam", "cuda")),
]

def cell(v):
    return "-" if v is None else f"{v:,}"

head = ["category"] + [c[0] for c in columns] + ["analytic"]
rows = []
for cat in CATS:
    rows.append([cat] + [cell(b["at_peak"][cat]) if b else "n/a" for _, _, b in columns]
                + [cell(analytic[cat])])
rows.append(["peak_bytes"] + [cell(b["peak_bytes"]) if b else "n/a" for _, _, b in columns]
            + ["-"])
rows.append(["peak at"] + [f'{b["peak_phase"]}#{b["peak_iteration"]}' if b else "n/a"
                           for _, _, b in columns] + ["-"])
rows.append(["fidelity"] + [b["fidelity"] if b else "n/a" for _, _, b in columns]
            + ["exact"])

widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
fmt = lambda r: "| " + " | ".join(
    (s.ljust(w) if i == 0 else s.rjust(w)) for i, (s, w) in enumerate(zip(r, widths))) + " |"
print()
print("at_peak bytes by category (mlp_adamw on candle, mlp_adam on raw cudarc):")
print(fmt(head))
print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
for r in rows:
    print(fmt(r))
print("  analytic: params = (784*512+512+512*10+10)*4, grads = params, Adam state = 2*params,")
print("  inputs = 64*784*4 + 64*4 (labels), activations = cudarc-mlp's forward survivors")
print()
for name, path, _ in columns:
    print(f"  {name:12} {path or 'no snapshot'}")

# The harness's phase-boundary overhead, if it prints one ("... overhead ...%").
for name, log in (("cudarc CUDA", "cudarc-mlp-vram.log"), ("candle CUDA", "candle-mlp-vram.log")):
    p = os.path.join(log_dir, log)
    if os.path.exists(p):
        hits = [l.strip() for l in open(p, errors="replace") if re.search(r"overhead", l, re.I)]
        print(f"  {name} boundary overhead: " + ("; ".join(hits[:3]) if hits else "not reported by the harness"))

# On a GPU machine a CUDA fixture that ran must leave a snapshot (an "ignored" test
# means the harness found no usable device: a failure here).
if columns[2][1] is None:
    print(f"cudarc-mlp produced no CUDA snapshot (rc {cudarc_rc})", file=sys.stderr)
    sys.exit(1)
if candle_rc != "skipped" and columns[1][1] is None:
    print(f"candle-mlp produced no CUDA snapshot (rc {candle_rc})", file=sys.stderr)
    sys.exit(1)
PY

echo
echo "gpu-check: $(($(date +%s) - started))s, logs in $LOG_DIR"
exit "$failed"
