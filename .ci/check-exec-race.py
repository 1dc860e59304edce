#!/usr/bin/env python3
"""Flags Rust code that writes a program and then runs it from the same process.

A test that writes or copies an executable and runs it while another test thread
starts a process can be refused with "Text file busy" (ETXTBSY, os error 26): the
forked child holds the writer's descriptor until it execs. The tests write such
programs with `tests/common/executable.rs` (written by a child process, or linked)
instead. This check finds the patterns that bring the race back:

- a permission mode with an execute bit (`from_mode(0o755)`, `.mode(0o700)`): a file
  made executable by the process that wrote it;
- `fs::copy` of a built program (`CARGO_BIN_EXE_…`, `current_exe()`).

Usage: check-exec-race.py [DIR...] (default: the repository), or --self-test.
Exit 1 with one line per finding (path:line: what and the cure).
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The one place allowed to make files executable: it writes them from a child process.
ALLOWED = {Path("tests/common/executable.rs")}
SKIP_DIRS = {"target", ".git", "node_modules"}

MODE = re.compile(r"(?:from_mode|\.mode)\s*\(\s*0o([0-7]{3,4})\s*\)")
COPY = re.compile(r"fs::copy\s*\(")
BUILT = re.compile(r"CARGO_BIN_EXE|current_exe\s*\(")
CURE = "write it with tests/common/executable.rs (write_executable, link_executable)"


def findings(text):
    """(line number, message) for each racy pattern in one file's text."""
    found = []
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        code = line.split("//", 1)[0]
        for m in MODE.finditer(code):
            if int(m.group(1), 8) & 0o111:
                found.append((n, f"a file made executable by the process that wrote it "
                                 f"(mode 0o{m.group(1)}): {CURE}"))
        if COPY.search(code):
            # The copy's arguments may span a few lines.
            call = " ".join(l.split("//", 1)[0] for l in lines[n - 1:n + 3])
            if BUILT.search(call):
                found.append((n, f"a built program copied by this process, then run: {CURE}"))
    return found


def scan(dirs):
    out = []
    for d in dirs:
        for path in sorted(Path(d).rglob("*.rs")):
            rel = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
            if set(rel.parts) & SKIP_DIRS or rel in ALLOWED:
                continue
            for n, msg in findings(path.read_text(errors="replace")):
                out.append(f"{rel}:{n}: {msg}")
    return out


def self_test():
    racy = [
        'std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();',
        'OpenOptions::new().write(true).mode(0o700).open(&p)',
        'std::fs::copy(env!("CARGO_BIN_EXE_cargo-vramtest"), bin.join(&exe)).unwrap();',
        'std::fs::copy(\n    std::env::current_exe().unwrap(),\n    &dst,\n)',
    ]
    fine = [
        'builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));',
        'std::fs::copy(committed, self.snapshots().join(name)).unwrap();',
        '// std::fs::copy(env!("CARGO_BIN_EXE_x"), y) in a comment',
        'let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;',
    ]
    for text in racy:
        assert findings(text), f"missed: {text}"
    for text in fine:
        assert not findings(text), f"flagged: {text} -> {findings(text)}"
    print("check-exec-race self-test: ok")


def main(argv):
    if argv == ["--self-test"]:
        self_test()
        return 0
    out = scan([Path(a) for a in argv] or [ROOT])
    for line in out:
        print(line)
    if out:
        print(f"{len(out)} place(s) that can make a test flake with \"Text file busy\"")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
