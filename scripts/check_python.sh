#!/usr/bin/env bash
# Installs the Python package from this checkout as a user would (`pip install .`, offline, into
# a fresh venv over Debian's python3 with its numpy, onnx and pytest) and runs its tests
# (python/tests) from outside the checkout, so that the installed package is what they import.
#
# usage: scripts/check_python.sh   (TESSERA_JOBS: build parallelism)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(mktemp -d "${TMPDIR:-/tmp}/tessera-venv.XXXXXX")
trap 'rm -rf "$venv"' EXIT
/usr/bin/python3 -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install --quiet --no-index --no-build-isolation .
cd "$venv"
"$venv/bin/python" -m pytest -q -p no:cacheprovider "$OLDPWD/python/tests"
