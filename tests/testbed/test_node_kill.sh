#!/usr/bin/env bash
# (c) A node process is SIGKILLed in the middle of a job: the testbed reports it, the job
# recovers (fault tolerance) or fails, and nothing of the testbed remains. Then a node is
# SIGKILLed while no job runs: the testbed tears itself down and exits 1.
source "$(dirname "$0")/common.sh"
tb_require_netns

jq --arg m "$tmp/metrics.jsonl" '.max_steps = 40 | .epochs = 10 | .metrics = $m' \
  "$here/job-mlp.json" >"$tmp/job.json"
tb_start_job "$tmp/metrics.jsonl" 3 --cluster "$here/cluster-3dev.json" --job "$tmp/job.json"
victim=$(ns_pids 1)
[[ $victim =~ ^[0-9]+$ ]] || fail "expected one process in asteroid-$tb_pid-1, got '$victim'"
tr '\0' ' ' <"/proc/$victim/cmdline" | grep -q -- "--name slow-1 " \
  || fail "process $victim is not node slow-1"
say "job at iteration $(grep -c '"iteration"' "$tmp/metrics.jsonl"): SIGKILL to node slow-1 (pid $victim)"
kill -KILL "$victim"
tb_wait 200
expect_output "node slow-1 \(pid $victim\) exited with status 137"
if (( tb_status == 0 )); then
  expect_output "job done: 40 steps"
  grep -q '"lost":\["slow-1"\]' "$tmp/metrics.jsonl" || fail "no recovery event for slow-1 in the metrics"
  say "the job recovered: $(grep -o 'job done: [^,]*' "$tmp/testbed.out")"
else
  say "the job failed after the node loss (status $tb_status)"
fi
assert_clean "$tb_pid"

tb_start --cluster "$here/cluster-3dev.json"
wait_for_lines "$tmp/testbed.out" "Ctrl-C stops them" 1 60
victim=$(ns_pids 2)
say "no job: SIGKILL to node slow-2 (pid $victim)"
kill -KILL "$victim"
tb_wait 30
expect_status 1 "node killed without a job"
expect_output "node slow-2 \(pid $victim\) exited with status 137"
expect_output "tearing the testbed down"
assert_clean "$tb_pid"
say "PASS"
