#!/usr/bin/env bash
# (a) A small hybrid-pipeline job (mlp, synthetic images, hand plan over all 3 devices) runs to
# completion on a 3-device emulated testbed, then the same job with "planner": "asteroid"
# (which probes the shaped links and sees the devices' slowdowns and memory budgets); after each
# run nothing of the testbed remains.
source "$(dirname "$0")/common.sh"
tb_require_netns

tb_run --cluster "$here/cluster-3dev.json" --job "$here/job-mlp.json" --keep-logs "$tmp/logs"
expect_status 0 "hand-plan job"
expect_output "3 devices in network namespaces asteroid-$tb_pid-0\.\.2"
expect_output "job done: 6 steps"
# Each node ran in its namespace, at its address, with its emulated slowdown and budget.
expect_log() {  # node regex
  grep -qE -- "$2" "$tmp/logs/$1.log" || fail "$1.log lacks /$2/: $(cat "$tmp/logs/$1.log")"
}
net='198\.1[89]\.[0-9]+'
expect_log fast-0 "listening on $net\.10:$port \(TLS, cluster CA [^,]*/keys/node0/ca.pem, device cpu, memory 2147483648 B, 1 threads, slowdown 1\.00, data plane [0-9]+\)"
expect_log slow-1 \
  "listening on $net\.11:$((port + 1)) \(TLS, cluster CA [^,]*/keys/node1/ca.pem, device cpu, memory 1073741824 B, 1 threads, slowdown 2\.00 emulated, data plane [0-9]+\)"
expect_log slow-2 "deployed s1r0@slow-2"
assert_clean "$tb_pid"

jq 'del(.plan) | .planner = "asteroid"' "$here/job-mlp.json" >"$tmp/job-planner.json"
tb_run --cluster "$here/cluster-3dev.json" --job "$tmp/job-planner.json"
expect_status 0 "planner job"
expect_output "planner asteroid: .* predicted"
expect_output "job done: 6 steps"
assert_clean "$tb_pid"
say "PASS"
