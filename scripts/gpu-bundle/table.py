#!/usr/bin/env python3
"""One table per GPU test: the CPU snapshot, the CUDA measurement and the analytic bytes,
category by category; what `untracked` holds; the phase-boundary overhead.

    table.py ROOT LOG_DIR

ROOT holds fixtures/<crate>/tests/snapshots (the CUDA measurement is the newest of
`@cuda.snap.new` and `@cuda.snap`); LOG_DIR holds the runs' logs (`<crate>-vram.log`).
Exit status 1 when a test that ran left no CUDA snapshot. Python 3 standard library only.
"""
import json
import os
import re
import sys

CATS = ["parameters", "gradients", "optimizer_state", "activations", "inputs",
        "temporaries", "workspace", "untracked"]

# The MLP both fixtures train: 784 -> 512 -> 10, f32, batch 64.
PARAMS = (784 * 512 + 512 + 512 * 10 + 10) * 4
INPUTS = 64 * 784 * 4 + 64 * 4
# cudarc-mlp's forward survivors: pre-activation and hidden (64x512), logits and
# probabilities (64x10), the loss.
CUDARC_ACTIVATIONS = (2 * 64 * 512 + 2 * 64 * 10 + 1) * 4

ANALYTIC = {
    ("cudarc-mlp", "mlp_adam"): {
        "parameters": PARAMS, "gradients": PARAMS, "optimizer_state": 2 * PARAMS,
        "inputs": INPUTS, "activations": CUDARC_ACTIVATIONS},
    ("cudarc-mlp", "mlp_adam_pool"): {
        "parameters": PARAMS, "gradients": PARAMS, "optimizer_state": 2 * PARAMS,
        "inputs": INPUTS, "activations": CUDARC_ACTIVATIONS},
    ("candle-mlp", "mlp_adamw"): {
        "parameters": PARAMS, "optimizer_state": 2 * PARAMS, "inputs": INPUTS},
    ("candle-mlp", "mlp_sgd"): {
        "parameters": PARAMS, "optimizer_state": 0, "inputs": INPUTS},
}

TESTS = list(ANALYTIC)

UNTRACKED = ("untracked: device memory in use that no allocation record or tracked "
             "buffer explains - the CUDA context's own growth, cuBLAS workspaces, loaded "
             "kernel modules, the pool's rounding to its granule. It is read device-wide "
             "(cuMemGetInfo): other processes on the same GPU count too.")


def body(path):
    """The JSON body of an insta-style snapshot: what follows the second `---` line."""
    with open(path) as f:
        lines = f.read().splitlines()
    seps = [i for i, line in enumerate(lines) if line.strip() == "---"]
    if len(seps) < 2:
        raise ValueError(f"{path}: no `---` header")
    return json.loads("\n".join(lines[seps[1] + 1:]))


def snapshot(root, crate, test, device):
    """(path, body) of the newest of `<snap>.new` and `<snap>`, or (None, None)."""
    base = os.path.join(root, "fixtures", crate, "tests", "snapshots",
                        f"vram__{test}@{device}.snap")
    found = [p for p in (base + ".new", base) if os.path.exists(p)]
    if not found:
        return None, None
    path = max(found, key=os.path.getmtime)
    return path, body(path)


def cell(v):
    return "-" if v is None else f"{v:,}"


def render(rows):
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for n, r in enumerate(rows):
        out.append("| " + " | ".join(
            (s.ljust(w) if i == 0 else s.rjust(w)) for i, (s, w) in enumerate(zip(r, widths)))
            + " |")
        if n == 0:
            out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(out)


def overhead(log_dir, crate, test):
    """The harness's `boundary overhead` line for `test`, from the crate's log."""
    path = os.path.join(log_dir, f"{crate}-vram.log")
    if not os.path.exists(path):
        return "no log"
    hits = []
    current = None
    with open(path, errors="replace") as f:
        for line in f:
            m = re.search(r"test (\S+)", line)
            if m:
                current = m.group(1)
            if "boundary overhead" in line and (current is None or current.endswith(test)):
                hits.append(line.strip())
    return "; ".join(hits[:2]) if hits else "not reported"


def main():
    root, log_dir = sys.argv[1], sys.argv[2]
    missing = []
    for crate, test in TESTS:
        cpu_path, cpu = snapshot(root, crate, test, "cpu")
        cuda_path, cuda = snapshot(root, crate, test, "cuda")
        analytic = ANALYTIC[(crate, test)]
        print(f"\n{crate} :: {test}")
        head = ["category", "CPU snapshot", "CUDA measurement", "analytic"]
        rows = [head]
        for cat in CATS:
            rows.append([cat,
                         cell(cpu["at_peak"][cat]) if cpu else "n/a",
                         cell(cuda["at_peak"][cat]) if cuda else "n/a",
                         cell(analytic.get(cat))])
        rows.append(["peak_bytes", cell(cpu["peak_bytes"]) if cpu else "n/a",
                     cell(cuda["peak_bytes"]) if cuda else "n/a", "-"])
        rows.append(["peak at",
                     f'{cpu["peak_phase"]}#{cpu["peak_iteration"]}' if cpu else "n/a",
                     f'{cuda["peak_phase"]}#{cuda["peak_iteration"]}' if cuda else "n/a", "-"])
        rows.append(["fidelity", cpu["fidelity"] if cpu else "n/a",
                     cuda["fidelity"] if cuda else "n/a", "-"])
        print(render(rows))
        if cuda:
            print(f"  untracked {cuda['at_peak']['untracked']:,} B at the peak. {UNTRACKED}")
        print(f"  boundary overhead: {overhead(log_dir, crate, test)}")
        print(f"  CPU snapshot:  {cpu_path or 'none (a CUDA-only test)'}")
        print(f"  CUDA snapshot: {cuda_path or 'none'}")
        if cuda is None:
            missing.append(f"{crate}::{test}")
    print("\n  analytic: parameters = (784*512+512+512*10+10)*4, gradients = parameters,")
    print("  Adam state = 2 * parameters, inputs = 64*784*4 + 64*4 (labels); activations:")
    print("  cudarc-mlp's forward survivors (64x512 twice, 64x10 twice, the loss).")
    if missing:
        print("no CUDA snapshot for: " + ", ".join(missing), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
