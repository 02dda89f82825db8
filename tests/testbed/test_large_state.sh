#!/usr/bin/env bash
# (i) Stage states far larger than what crosses a 100 Mbit/s link within the heartbeat window
# (an mlp of 3072- and 2048-wide layers: stage 0 holds 33 MiB of weights, 2.8 s at 100 Mbit/s
# where the supervisor counts a node lost after 1 s of silence) deploy, recover after a node is
# killed, and are gathered at the end. Sent as one CAF message each, they held the
# supervisor's heartbeats back for seconds and every node was counted lost while it deployed; they
# now move in 1 MiB pieces (docs/runtime.md, "Moving stage states").
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
# Both members of stage 0 (layers 0-1) were deployed from pieces (stage 1, the classifier on
# slow-2, is one piece).
for node in fast-0 slow-1; do
  grep -q "sent in pieces" "$tmp/logs/$node.log" \
    || fail "$node.log has no deployment from pieces: $(grep -i deploy "$tmp/logs/$node.log")"
done
say "deployed in $deploy_s s; recovered; $(grep -o 'job done: [^,]*, [^,]*' "$tmp/testbed.out")"
assert_clean "$tb_pid"
say "PASS"
