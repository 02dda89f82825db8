#!/usr/bin/env bash
# README command 2: install dependencies, build everything, run the whole test suite.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
build="${ASTEROID_BUILD_DIR:-$root/build}"
cd "$build"
ctest --output-on-failure -j "${ASTEROID_TEST_JOBS:-$(nproc)}" --timeout 900
