#!/usr/bin/env bash
# README command 1: install dependencies, build, and run the main job on its
# embedded default: a local cluster of 4 node processes on loopback (two of them
# emulated 2x slower, with smaller memory budgets) training the small CNN on
# Fashion-MNIST with hybrid pipeline parallelism, 2 stages x 2 replicas with
# unequal shares (examples/jobs/fashion_cnn_4dev.json). Extra arguments go to
# `asteroid cluster`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh" --target asteroid_cli
build="${ASTEROID_BUILD_DIR:-$root/build}"
cd "$build"
exec "$build/apps/asteroid" cluster --nodes 4 --base-port 27000 \
  --slowdown 1,1,2,2 --memory 2GiB,2GiB,1GiB,1GiB \
  --job "$root/examples/jobs/fashion_cnn_4dev.json" "$@"
