#!/usr/bin/env python3
"""Checks the book and the repository's front pages for what mdbook does not check.

    python3 scripts/check-book.py target/book

- every relative link and image of the built HTML (target/book, `mdbook build docs`)
  points at a file of the book, and every `#anchor` at an id of that page;
- every relative link of README.md, CONTRIBUTING.md and cargo-vramtest/README.md
  points at a file of the repository, and none at a page under docs/src (GitHub shows
  its `{{#include …}}` lines as written): they link the published book instead, whose
  address follows from docs/book.toml's `git-repository-url` (GitHub Pages:
  `https://OWNER.github.io/REPO/`), and each such link must name a page of the built
  book (and an id of that page, for an `#anchor`);
- every `{{#include ….snap:5:}}` of the book skips exactly an insta header (four lines:
  `---`, two or three keys, `---`), so a golden's header never shows in the book;
- the CI examples the book includes work: `docs/src/ci/examples/pin-gpu.sh` pins a
  test to its nextest slot's GPU and leaves other tests alone, and
  `docs/src/ci/examples/nextest.toml` puts the vramtest binaries in a test group it
  defines;
- every fenced block of README.md under a `<!-- from PATH -->` line is, line for line,
  a piece of PATH (a file CI compiles, or a golden a test checks; `// ...` or `...`
  skips), so the README's examples and outputs cannot go stale.

Nothing here reaches the network. Exits 1 with one line per problem.
"""

import html.parser
import os
import pathlib
import re
import subprocess
import sys
import urllib.parse

try:
    import tomllib  # Python 3.11+
except ImportError:  # older Pythons: the nextest example is not parsed
    tomllib = None

ROOT = pathlib.Path(__file__).resolve().parent.parent
SGR = re.compile("\x1b\\[[0-9;]*m")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


class Page(html.parser.HTMLParser):
    """The ids a page defines and the links it makes."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("id", "name") and value:
                self.ids.add(value)
            if value and ((tag == "a" and name == "href") or (tag in ("img", "script") and name == "src")
                          or (tag == "link" and name == "href")):
                self.links.append(value)


def parse_pages(book):
    pages = {}
    for path in sorted(book.rglob("*.html")):
        page = Page()
        page.feed(path.read_text(encoding="utf-8"))
        pages[path.resolve()] = page
    return pages


def check_html(book, pages):
    problems = []
    if not pages:
        return [f"{book}: no HTML page (run `mdbook build docs` first)"]
    for path, page in pages.items():
        for link in page.links:
            if EXTERNAL.match(link) or link.startswith("//"):
                continue
            target, _, anchor = link.partition("#")
            target = urllib.parse.unquote(target)
            dest = path if not target else (path.parent / target).resolve()
            where = path.relative_to(book.resolve())
            if dest.is_dir():
                dest = dest / "index.html"
            if not dest.exists():
                problems.append(f"{where}: broken link `{link}`")
                continue
            if anchor and dest.suffix == ".html":
                ids = pages.get(dest)
                if ids is not None and urllib.parse.unquote(anchor) not in ids.ids:
                    problems.append(f"{where}: link `{link}` names no anchor of its page")
    return problems


def book_url():
    """The published book's address, from docs/book.toml's `git-repository-url`
    (`https://github.com/OWNER/REPO` is published at `https://OWNER.github.io/REPO/`)."""
    text = (ROOT / "docs/book.toml").read_text(encoding="utf-8")
    found = re.search(r'^git-repository-url = "https://github\.com/([^/"]+)/([^/"]+)"', text, re.M)
    if not found:
        sys.exit("check-book: docs/book.toml has no git-repository-url on github.com")
    owner, repo = found.groups()
    return f"https://{owner.lower()}.github.io/{repo}/"


def check_book_link(name, target, book, pages):
    """A front page's link into the published book names a built page (and anchor)."""
    rest, _, anchor = target[len(book_url()):].partition("#")
    path = (book / (rest or "index.html")).resolve()
    if not path.exists():
        return [f"{name}: `{target}` names no page of the book"]
    page = pages.get(path)
    if anchor and page is not None and urllib.parse.unquote(anchor) not in page.ids:
        return [f"{name}: `{target}` names no anchor of its page"]
    return []


def check_front_pages(book, pages):
    problems = []
    link = re.compile(r"\]\(([^)\s]+)\)")
    for name in ("README.md", "CONTRIBUTING.md", "cargo-vramtest/README.md"):
        page = ROOT / name
        if not page.exists():
            problems.append(f"{name}: missing")
            continue
        text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
        for target in link.findall(text):
            if target.startswith(book_url()):
                problems += check_book_link(name, target, book, pages)
                continue
            if EXTERNAL.match(target) or target.startswith("#"):
                continue
            path = (page.parent / target.partition("#")[0]).resolve()
            if not path.exists():
                problems.append(f"{name}: broken link `{target}`")
            elif path.suffix == ".md" and (ROOT / "docs/src") in path.parents:
                problems.append(
                    f"{name}: `{target}` links the book's source, which GitHub shows with its {{{{#include}}}} lines; link {book_url()} instead"
                )
    return problems


def check_snap_includes():
    problems = []
    include = re.compile(r"\{\{#include ([^}:]+\.snap):5:\}\}")
    for page in sorted((ROOT / "docs/src").rglob("*.md")):
        for target in include.findall(page.read_text(encoding="utf-8")):
            snap = (page.parent / target).resolve()
            where = page.relative_to(ROOT)
            if not snap.exists():
                problems.append(f"{where}: includes a missing golden `{target}`")
                continue
            lines = snap.read_text(encoding="utf-8").split("\n")
            if lines[0] != "---" or lines[3] != "---" or "---" in lines[1:3]:
                problems.append(
                    f"{where}: `{target}` no longer has a four-line insta header; include it from its first body line"
                )
    return problems


def check_ci_examples():
    problems = []
    examples = ROOT / "docs/src/ci/examples"
    script = examples / "pin-gpu.sh"
    show = ["sh", str(script), "sh", "-c", 'printf %s "${CUDA_VISIBLE_DEVICES-unset}"']
    for slot, expected in (("2", "2"), (None, "unset"), ("x", "unset")):
        env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "NEXTEST_TEST_GROUP_SLOT")}
        if slot is not None:
            env["NEXTEST_TEST_GROUP_SLOT"] = slot
        got = subprocess.run(show, env=env, capture_output=True, text=True).stdout
        if got != expected:
            problems.append(f"{script.relative_to(ROOT)}: slot {slot!r} gives CUDA_VISIBLE_DEVICES {got!r}, not {expected!r}")
    if tomllib is None:
        print("check-book: no tomllib (Python < 3.11): docs/src/ci/examples/nextest.toml not parsed")
        return problems
    config = tomllib.loads((examples / "nextest.toml").read_text(encoding="utf-8"))
    groups = config.get("test-groups", {})
    overrides = config.get("profile", {}).get("default", {}).get("overrides", [])
    if not all(isinstance(g.get("max-threads"), int) for g in groups.values()) or not groups:
        problems.append("docs/src/ci/examples/nextest.toml: a test group without an integer max-threads")
    for o in overrides:
        if o.get("test-group") not in groups or "filter" not in o:
            problems.append(f"docs/src/ci/examples/nextest.toml: override {o} names no defined test group")
    return problems


def check_readme_examples():
    problems = []
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^<!-- from (\S+) -->\n```[\w,]*\n(.*?)^```", text, re.S | re.M)
    if not blocks:
        problems.append("README.md: no example marked `<!-- from PATH -->`")
    for name, body in blocks:
        source = ROOT / name
        if not source.exists():
            problems.append(f"README.md: an example names a missing file `{name}`")
            continue
        runs, run = [], []
        for line in body.rstrip("\n").split("\n"):
            if line.strip() in ("// ...", "..."):
                runs.append(run)
                run = []
            else:
                run.append(line)
        runs.append(run)
        # Goldens of colored output hold escape codes; the README shows the text.
        lines = SGR.sub("", source.read_text(encoding="utf-8")).split("\n")
        if not is_piece([r for r in runs if r], lines):
            problems.append(f"README.md: the example from `{name}` is not in that file any more; copy it again")
    return problems


def is_piece(runs, source):
    """Whether each run of lines appears contiguously in `source`, the runs in order
    (the README skips between them with `// ...`)."""
    pos = 0
    for run in runs:
        found = next(
            (i for i in range(pos, len(source) - len(run) + 1) if source[i:i + len(run)] == run),
            None,
        )
        if found is None:
            return False
        pos = found + len(run)
    return True


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: python3 scripts/check-book.py BOOK_HTML_DIR")
    book = pathlib.Path(sys.argv[1])
    pages = parse_pages(book)
    problems = (
        check_html(book, pages)
        + check_front_pages(book, pages)
        + check_snap_includes()
        + check_ci_examples()
        + check_readme_examples()
    )
    for p in problems:
        print(f"check-book: {p}")
    if problems:
        sys.exit(1)
    print("check-book: every link resolves, every included golden and README example is current")


if __name__ == "__main__":
    main()
