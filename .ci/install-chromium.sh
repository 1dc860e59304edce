#!/usr/bin/env bash
# Installs Debian's chromium for the HTML report's headless-browser test, only when
# it is missing. Needs root (or sudo) and apt; anywhere else it says what to do and
# leaves the test to skip itself.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    echo "chromium is already installed"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "no apt-get here: install chromium by hand to run the browser test (it skips without it)" >&2
    exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        sudo="sudo"
    else
        echo "not root and no sudo: install chromium by hand to run the browser test" >&2
        exit 0
    fi
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium fonts-liberation
chromium --version
