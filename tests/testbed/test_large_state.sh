#!/usr/bin/env bash
# (i) Stage states far larger than what crosses a 100 Mbit/s link within the heartbeat window
# (an mlp of 3072- and 2048-wide layers: stage 0 holds 33 MiB of weights, 2.8 s at 100 Mbit/s
# where the supervisor counts a node lost after 1 s of silence) deploy, recover after a node is
# killed, and are gathered at the end. Sent as one CAF message each, they held the
# supervisor's heartbeats back for seconds and every node was counted lost while it deployed; they
# now go as data-plane frames beside CAF (or, without data planes, in 1 MiB CAF pieces;
# docs/runtime.md, "Moving stage states").
source "$(dirname "$0")/common.sh"
tb_require_netns

jq --arg m "$tmp/metrics.jsonl" '.model_options = {"hidden_sizes": [3072, 2048]}
  | .max_steps = 3 | .synthetic_count = 256 | .metrics = $m
  | .faults = [{"step": 1, "node": 2, "action": "kill"}]' \
  "$here/job-mlp.json" >"$tmp/job.json"
tb_run --cluster "$here/cluster-3dev.json" --job "$tmp/job.json" --keep-logs "$tmp/logs"
expect_status 0 "large-state job"
expect_output "job done: 3 steps"
if grep -q '"lost_during_deployment"' "$tmp/metrics.jsonl"; then
  fail "a node was lost while the job deployed: $(grep lost_during_deployment "$tmp/metrics.jsonl")"
fi
grep -q '"fault":"recovered"' "$tmp/metrics.jsonl" || fail "no recovery in the metrics"
deploy_s=$(jq -r 'select(.event == "start") | .deploy_s' "$tmp/metrics.jsonl")
[[ $deploy_s =~ ^[0-9.]+$ ]] || fail "the start record has no deploy_s: '$deploy_s'"
# Every member's state went from the supervisor's process as a data-plane frame, none in pieces.
sent=$(jq -r 'select(.event == "start") | .states_sent' "$tmp/metrics.jsonl")
[[ $sent == 3 ]] || fail "the first deployment sent $sent stage states over the data plane, not 3"
for node in fast-0 slow-1 slow-2; do
  if grep -q "sent in pieces" "$tmp/logs/$node.log"; then
    fail "$node.log has a deployment from pieces: $(grep -i deploy "$tmp/logs/$node.log")"
  fi
done
say "deployed in $deploy_s s ($sent states as data-plane frames); recovered; $(grep -o 'job done: [^,]*, [^,]*' "$tmp/testbed.out")"
assert_clean "$tb_pid"
say "PASS"
