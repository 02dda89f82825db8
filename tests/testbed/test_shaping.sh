#!/usr/bin/env bash
# (d) Shaped links limit throughput: on a 3-device testbed with a bandwidth matrix of 10 and
# 40 Mbit/s links, raw TCP transfers between namespaces and `asteroid probe` (as
# the planner measures, on the data plane) must each reach 0.5-1.2 x the configured rate of their link. Where
# the kernel has netem, the probe's one-way latency must be near the cluster's 10 ms.
source "$(dirname "$0")/common.sh"
tb_require_netns

cluster="$here/cluster-links.json"
tb_run --cluster "$cluster" -- bash "$here/measure_links.sh" "$exe" "$tmp/links" $((port + 5)) \
  0:1:10 1:0:10 0:2:40 2:0:40 1:2:10
expect_status 0 "testbed"
assert_clean "$tb_pid"

in_band() { awk -v m="$1" -v c="$2" 'BEGIN { exit !(m >= 0.5 * c && m <= 1.2 * c) }'; }
bad=0
echo "link      configured  raw TCP (Mbit/s)  asteroid probe (Mbit/s)  probe latency (ms)"
while read -r kind a b mbit measured bytes seconds; do
  probe=$(jq -r ".bandwidth_mbps[$a][$b]" "$tmp/links.probe")
  latency=$(jq -r ".latency_ms[$a][$b]" "$tmp/links.probe")
  printf '%d -> %d    %6s      %8.2f          %8.2f                 %6.2f\n' \
    "$a" "$b" "$mbit" "$measured" "$probe" "$latency"
  in_band "$measured" "$mbit" \
    || { echo "FAIL: raw TCP $a -> $b: $measured Mbit/s, configured $mbit" >&2; bad=1; }
  in_band "$probe" "$mbit" \
    || { echo "FAIL: probe $a -> $b: $probe Mbit/s, configured $mbit" >&2; bad=1; }
  if grep -q "no netem qdisc" "$tmp/testbed.out"; then
    :
  elif ! awk -v l="$latency" 'BEGIN { exit !(l >= 5 && l <= 30) }'; then
    echo "FAIL: probe latency $a -> $b: $latency ms, configured 10 ms" >&2; bad=1
  fi
done <"$tmp/links"
# The pairs not measured with TCP (2 -> 1) still go through the probe.
probe=$(jq -r '.bandwidth_mbps[2][1]' "$tmp/links.probe")
in_band "$probe" 10 || { echo "FAIL: probe 2 -> 1: $probe Mbit/s, configured 10" >&2; bad=1; }
if grep -q "no netem qdisc" "$tmp/testbed.out"; then
  say "this kernel has no netem qdisc: latency not emulated, not checked"
fi
(( bad == 0 )) || { cat "$tmp/testbed.out" >&2; fail "a link is outside 0.5-1.2 x its rate"; }
say "PASS"
