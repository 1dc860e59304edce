#!/usr/bin/env python3
"""Draws the README's and the book's failure picture from a golden the tests check.

The golden is the colored terminal output `cargo vramtest` prints for a regression of
the candle MLP fixture (the table, the failure block with its diff, the summary),
pinned by `a_failure_block_colors_its_diff` in cargo-vramtest/src/output/table.rs.
This script turns its ANSI escape codes into a terminal picture, an SVG:

    python3 scripts/render-failure-svg.py           # rewrite docs/src/images/failure.svg
    python3 scripts/render-failure-svg.py --check   # exit 1 when the picture is stale

CI runs the check, so the picture always shows what the tool prints today.
"""

import pathlib
import re
import sys
from xml.sax.saxutils import escape

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOLDEN = (
    ROOT
    / "cargo-vramtest/src/output/snapshots"
    / "cargo_vramtest__output__table__tests__a_failure_block_colors_its_diff.snap"
)
SVG = ROOT / "docs/src/images/failure.svg"
REGENERATE = "python3 scripts/render-failure-svg.py"

FONT_SIZE = 13
CHAR_WIDTH = 7.8  # a monospace advance at FONT_SIZE, a little wide to be safe
LINE_HEIGHT = 17
PAD = 14
BACKGROUND = "#1e1f24"
FOREGROUND = "#d8dae0"
COLORS = {31: "#f0716f", 32: "#7cc77a", 33: "#e5c07b", 34: "#6cb0f0", 35: "#c792ea", 36: "#56c4d0"}
SGR = re.compile("\x1b\\[([0-9;]*)m")


def golden_body(text):
    """The snapshot's contents: what follows the header's closing `---`."""
    parts = text.split("---\n", 2)
    if len(parts) != 3:
        sys.exit(f"render-failure-svg: {GOLDEN.relative_to(ROOT)} has no insta header")
    return parts[2].rstrip("\n")


def spans(line):
    """The line as (text, bold, color) runs, its escape codes applied."""
    bold, color, pos, out = False, None, 0, []
    for m in SGR.finditer(line):
        if m.start() > pos:
            out.append((line[pos:m.start()], bold, color))
        for code in [int(c) for c in (m.group(1) or "0").split(";") if c]:
            if code == 0:
                bold, color = False, None
            elif code == 1:
                bold = True
            elif code == 22:
                bold = False
            elif code == 39:
                color = None
            elif code in COLORS:
                color = code
        pos = m.end()
    if pos < len(line):
        out.append((line[pos:], bold, color))
    return out


def render(body):
    lines = body.split("\n")
    columns = max(len(SGR.sub("", l)) for l in lines)
    width = round(2 * PAD + columns * CHAR_WIDTH)
    height = 2 * PAD + len(lines) * LINE_HEIGHT
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" '
        'aria-label="cargo vramtest: a memory regression of the candle MLP fixture">',
        f'<rect width="{width}" height="{height}" rx="6" fill="{BACKGROUND}"/>',
        f'<g font-family="ui-monospace, SFMono-Regular, Menlo, Consolas, monospace" '
        f'font-size="{FONT_SIZE}" fill="{FOREGROUND}">',
    ]
    for i, line in enumerate(lines):
        y = PAD + (i + 1) * LINE_HEIGHT - 4
        runs = []
        for text, bold, color in spans(line):
            # Non-breaking spaces: every renderer keeps them, so the columns line up.
            text = text.replace(" ", "\u00a0")
            attrs = ""
            if bold:
                attrs += ' font-weight="bold"'
            if color is not None:
                attrs += f' fill="{COLORS[color]}"'
            runs.append(f"<tspan{attrs}>{escape(text)}</tspan>" if attrs else escape(text))
        out.append(f'<text x="{PAD}" y="{y}">{"".join(runs)}</text>')
    out += ["</g>", "</svg>", ""]
    return "\n".join(out)


def main():
    check = sys.argv[1:] == ["--check"]
    if sys.argv[1:] not in ([], ["--check"]):
        sys.exit(f"usage: {REGENERATE} [--check]")
    svg = render(golden_body(GOLDEN.read_text(encoding="utf-8")))
    if check:
        current = SVG.read_text(encoding="utf-8") if SVG.exists() else None
        if current != svg:
            sys.exit(
                f"render-failure-svg: {SVG.relative_to(ROOT)} is not what "
                f"{GOLDEN.relative_to(ROOT)} draws; run `{REGENERATE}` and commit it"
            )
        print(f"render-failure-svg: {SVG.relative_to(ROOT)} is current")
        return
    SVG.parent.mkdir(parents=True, exist_ok=True)
    SVG.write_text(svg, encoding="utf-8")
    print(f"render-failure-svg: wrote {SVG.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
