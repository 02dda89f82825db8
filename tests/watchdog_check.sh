#!/usr/bin/env bash
# The test watchdog names a test case that outlives its deadline and aborts
# the test program (test_watchdog.cpp). Usage: watchdog_check.sh PROBE
set -u
probe=$1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# CTest's timeout 32 s: the watchdog fires 30 s before it, after 2 s.
ASTEROID_TEST_TIMEOUT_S=32 timeout 90 "$probe" "[.hangs]" >"$out" 2>&1
rc=$?
cat "$out"
if [ "$rc" -ne 134 ]; then
  echo "watchdog_check: expected the probe to abort (exit 134), got $rc"
  exit 1
fi
if ! grep -q "watchdog: test case 'a test case that hangs' still running after 2 s" "$out"; then
  echo "watchdog_check: the watchdog did not name the test case"
  exit 1
fi
echo "watchdog_check: ok"
