#!/usr/bin/env bash
# (b) The testbed gets SIGINT in the middle of a job (sent to it alone, then to its whole process
# group as Ctrl-C in a terminal does), then SIGTERM in the middle of a command that started
# children of its own: each time it stops within seconds with 128 + the signal, and nothing of
# it remains (nodes, job, the command's children, namespaces, veths, bridge, qdiscs).
source "$(dirname "$0")/common.sh"
tb_require_netns

jq --arg m "$tmp/metrics.jsonl" '.max_steps = 2000 | .epochs = 200 | .metrics = $m' \
  "$here/job-mlp.json" >"$tmp/job-long.json"
tb_start_job "$tmp/metrics.jsonl" 3 --cluster "$here/cluster-3dev.json" --job "$tmp/job-long.json"
pgrep -f "asteroid job --config .*asteroid-testbed-$tb_pid\." >/dev/null || fail "no job process"
[[ -n $(ns_pids 2) ]] || fail "no process in namespace asteroid-$tb_pid-2"
say "job at iteration $(grep -c '"iteration"' "$tmp/metrics.jsonl"): sending SIGINT"
t0=$EPOCHREALTIME
kill -INT "$tb_pid"
tb_wait 30
say "torn down in $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.2f", b - a}') s"
expect_status 130 "SIGINT to the testbed"
expect_output "got SIGINT"
assert_clean "$tb_pid"

tb_start_job "$tmp/metrics.jsonl" 3 --cluster "$here/cluster-3dev.json" --job "$tmp/job-long.json"
say "job at iteration $(grep -c '"iteration"' "$tmp/metrics.jsonl"): SIGINT to process group $tb_pid"
kill -INT -- "-$tb_pid"
tb_wait 30
expect_status 130 "SIGINT to its process group"
assert_clean "$tb_pid"

marker="7777.$port"
tb_start --cluster "$here/cluster-3dev.json" -- bash -c "sleep $marker & sleep $marker & wait"
for _ in $(seq 300); do (( $(pgrep -fc "^sleep $marker\$" || true) >= 2 )) && break; sleep 0.1; done
if (( $(pgrep -fc "^sleep $marker\$" || true) < 2 )); then
  cat "$tmp/testbed.out" >&2
  fail "command did not start"
fi
say "command running: sending SIGTERM"
kill -TERM "$tb_pid"
tb_wait 30
expect_status 143 "SIGTERM during a command"
pgrep -af "^sleep $marker\$" && fail "the command's children survived"
assert_clean "$tb_pid"
say "PASS"
