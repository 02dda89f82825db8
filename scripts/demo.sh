#!/usr/bin/env bash
# README command 1: install dependencies, build, and run the main job on its
# embedded default: the small CNN trained on Fashion-MNIST for 2 epochs on this
# machine (single device). Extra arguments go to `asteroid train`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh" --target asteroid_cli
build="${ASTEROID_BUILD_DIR:-$root/build}"
exec "$build/apps/asteroid" train --model cnn --dataset fashion-mnist \
  --epochs 2 --batch-size 64 --lr 0.05 --metrics "$build/demo-metrics.jsonl" "$@"
