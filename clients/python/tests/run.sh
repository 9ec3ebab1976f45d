#!/usr/bin/env bash
# The Python client's own tests: a fresh venv, `pip install clients/python`
# (nothing comes from a package index: the client has no dependencies and
# builds with its in-tree backend), then the tests against a real sagad.
# Usage: run.sh SAGAD_BIN SERVICES_BIN
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
SAGAD_BIN=$(realpath "$1") SERVICES_BIN=$(realpath "$2")
export SAGAD_BIN SERVICES_BIN
venv=$(mktemp -d /tmp/sagad-client-venv-XXXXXX)
trap 'rm -rf "$venv"' EXIT
/usr/bin/python3 -m venv "$venv"
PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/pip" install --quiet "$here"
cd "$venv"  # import the installed package, not the source tree
"$venv/bin/python" -m unittest discover -v -s "$here/tests" -t "$here/tests"
