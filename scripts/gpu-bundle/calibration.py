#!/usr/bin/env python3
"""The pool model against the device: for each test that ran on both, the allocated and
reserved peaks predicted from the CPU run beside those the CUDA run measured.

    calibration.py CPU_REPORTS CUDA_REPORTS
    calibration.py --self-test

CPU_REPORTS and CUDA_REPORTS are the report folders (`VRAMTEST_REPORT_DIR`) of one test
binary run with VRAMTEST_DEVICE=cpu and VRAMTEST_DEVICE=cuda. Predicted: the CPU run's
`details.predicted_pool` (its allocations replayed through the CUDA stream-ordered pool
model: 256 B alignment, 2 MiB granules). Measured: the CUDA run's peak less `untracked`
(the bytes the pool handed out at the peak) and its `reserved_bytes` (the pool's
RESERVED_MEM_HIGH). A ratio of 1.00 is a model that matches the device; the table is what
a run on real hardware settles. Exit status 1 when no test has both figures. Python 3
standard library only.
"""
import json
import os
import sys

MIB = 1 << 20


def reports(folder):
    """(target, test) -> report, for every JSON report in `folder`."""
    found = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            with open(os.path.join(folder, name)) as f:
                r = json.load(f)
            found[(r["target"], r["test"])] = r
    return found


def predicted(report):
    """(allocated, reserved) the CPU run predicts, or None."""
    pool = (report.get("details") or {}).get("predicted_pool")
    if not pool:
        return None
    return pool["allocated_bytes"], pool["reserved_bytes"]


def measured(report):
    """(allocated, reserved) the CUDA run measured, or None (reserved: None without
    memory pools)."""
    body = report.get("body")
    if not body or body.get("device_class") != "cuda":
        return None
    allocated = body["peak_bytes"] - body["at_peak"]["untracked"]
    return allocated, body.get("reserved_bytes")


def ratio(measured_bytes, predicted_bytes):
    if measured_bytes is None or not predicted_bytes:
        return "—"
    return f"{measured_bytes / predicted_bytes:.2f}"


def mib(n):
    return "—" if n is None else f"{n / MIB:.2f} MiB"


def rows(cpu, cuda):
    """One row per test with both a prediction and a measurement."""
    out = []
    for key in sorted(set(cpu) & set(cuda)):
        p, m = predicted(cpu[key]), measured(cuda[key])
        if p is None or m is None:
            continue
        out.append((f"{key[0]}::{key[1]}", p, m))
    return out


def table(rows_):
    head = ("TEST", "ALLOCATED predicted", "measured", "ratio",
            "RESERVED predicted", "measured", "ratio")
    lines = [head]
    for name, (pa, pr), (ma, mr) in rows_:
        lines.append((name, mib(pa), mib(ma), ratio(ma, pa), mib(pr), mib(mr), ratio(mr, pr)))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip()
                     for line in lines)


def self_test():
    cpu = {("vram", "mlp"): {"target": "vram", "test": "mlp", "details": {
        "predicted_pool": {"allocated_bytes": 10 * MIB, "reserved_bytes": 12 * MIB}}}}
    cuda = {("vram", "mlp"): {"target": "vram", "test": "mlp", "body": {
        "device_class": "cuda", "peak_bytes": 11 * MIB + 512 * MIB,
        "at_peak": {"untracked": 512 * MIB}, "reserved_bytes": 12 * MIB}},
        ("vram", "gpu_only"): {"target": "vram", "test": "gpu_only", "body": {
            "device_class": "cuda", "peak_bytes": MIB, "at_peak": {"untracked": 0}}}}
    got = rows(cpu, cuda)
    assert got == [("vram::mlp", (10 * MIB, 12 * MIB), (11 * MIB, 12 * MIB))], got
    text = table(got)
    assert "vram::mlp  10.00 MiB" in text and "11.00 MiB  1.10" in text, text
    assert text.rstrip().endswith("12.00 MiB  1.00"), text
    assert measured({"body": {"device_class": "cpu"}}) is None
    assert predicted({"details": None}) is None
    print("calibration.py: self-test passed")


def main(argv):
    if argv[1:] == ["--self-test"]:
        self_test()
        return 0
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    found = rows(reports(argv[1]), reports(argv[2]))
    if not found:
        print("calibration: no test has both a CPU prediction and a CUDA measurement",
              file=sys.stderr)
        return 1
    print("pool model against the device (predicted from the CPU run, measured on the GPU):")
    print(table(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
