#!/usr/bin/env bash
# Installs Debian's chromium for the HTML report's headless-browser tests, only when
# it is missing. Needs root (or sudo) and apt; anywhere else it says what to do and
# leaves the tests to skip themselves (or to fail, where VRAMTEST_REQUIRE_CHROMIUM is
# set, as in CI).
set -euo pipefail

if command -v chromium-browser >/dev/null 2>&1; then
    echo "chromium is already installed"
    exit 0
fi
bash "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" chromium chromium fonts-liberation
if command -v chromium >/dev/null 2>&1; then
    chromium --version
fi
