#!/usr/bin/env bash
# Usage: .ci/apt-install.sh COMMAND PACKAGE...
# Installs Debian PACKAGEs when COMMAND is missing. Needs root (or sudo) and apt;
# anywhere else it says what to do and installs nothing: the tests that need COMMAND
# then skip (locally) or fail naming it (in CI, where .ci/run requires it).
set -euo pipefail

command=$1
shift
if command -v "$command" >/dev/null 2>&1; then
    echo "$command is already installed"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "no apt-get here: install $* by hand (the tests that need $command skip without it)" >&2
    exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        sudo="sudo"
    else
        echo "not root and no sudo: install $* by hand (the tests that need $command skip without it)" >&2
        exit 0
    fi
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@"
command -v "$command"
