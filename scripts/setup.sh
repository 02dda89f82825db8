#!/usr/bin/env bash
# Installs every Debian 12 package Asteroid needs, and nothing from anywhere else.
# Idempotent: when everything is present it does nothing (and needs no network).
# As root it runs apt-get; otherwise it prints the exact command to run.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libtorch-dev          # LibTorch 1.13.1, CPU build
  libopenblas0-openmp   # OpenBLAS for LibTorch's matrix products (libtorch-dev alone runs them on
                        # the reference BLAS, 15x slower on the cnn's linear layer here); the
                        # OpenMP build follows LibTorch's thread count (`--threads`)
  libcaf-dev            # C++ Actor Framework 0.17.6 (core, io, openssl)
  libssl-dev            # OpenSSL: TLS of the data plane, `asteroid keys`
  libasio-dev           # standalone Asio: the data plane's event loop
  libboost-context-dev  # Boost.Context: the fiber of the supervisor's step driver
  libcereal-dev libspdlog-dev libcli11-dev nlohmann-json3-dev zlib1g-dev
  catch2 libbenchmark-dev
  dataset-fashion-mnist # /usr/share/datasets/fashion-mnist
  gnuplot-nox iproute2 procps
  jq                    # scripts/testbed.sh reads cluster and job files (iproute2: ip, tc)
  iperf3                # runtime_bench: the transfer-speed anchor
  gdb                   # tests: the stacks of a test that hangs (tests/test_watchdog.cpp)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing packages: ${missing[*]}" >&2
  echo "setup: run as root, or:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
