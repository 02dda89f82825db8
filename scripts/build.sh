#!/usr/bin/env bash
# Configures and builds Asteroid into ./build (Release, Ninja, ccache when present).
# Extra arguments are passed to `cmake --build` (e.g. `--target asteroid`).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${ASTEROID_BUILD_DIR:-$root/build}"
jobs="${ASTEROID_JOBS:-$(nproc)}"
# PCH and ccache: the precompiled header must not defeat cache hits.
# Relative paths let a fresh clone elsewhere hit the cache of an earlier build.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
start=$(date +%s)
cmake --build "$build" -j "$jobs" "$@"
echo "build: done in $(( $(date +%s) - start )) s ($build)"
