#!/usr/bin/env bash
# (g) A node's link is cut for 2 s in the middle of a job and healed (`cut`, then `heal` 2 s
# later, in the same step) with a heartbeat window wider than the cut plus TCP's retransmission
# back-off (1000 ms x 6). The cut costs a stall, not the job: no loss is detected, nothing is
# recovered, and every step's loss and the final weights and optimizer state (the jobs'
# checkpoints) equal those of a fault-free run of the same job on the same testbed. Then nothing remains. (A connection that breaks outright is healed by the data plane
# itself: the resent frames are tested in actors_unit_tests and fault_tolerance_tests.)
source "$(dirname "$0")/common.sh"
tb_require_netns

jq --arg m "$tmp/ref.jsonl" --arg c "$tmp/ref.ckpt" \
  '.max_steps = 30 | .epochs = 10 | .metrics = $m
   | .fault_tolerance = {"heartbeat_ms": 1000, "heartbeat_misses": 6, "checkpoint": $c}' \
  "$here/job-mlp.json" >"$tmp/ref.json"
jq --arg m "$tmp/cut.jsonl" --arg c "$tmp/cut.ckpt" \
  '.metrics = $m | .fault_tolerance.checkpoint = $c
   | .faults = [{"step": 6, "delay_ms": 20, "node": 1, "action": "cut"},
                {"step": 6, "delay_ms": 2020, "node": 1, "action": "heal"}]' \
  "$tmp/ref.json" >"$tmp/cut.json"
tb_run_jobs "$here/cluster-3dev.json" ref cut
expect_status 0 "reference and cut-and-healed jobs"
expect_two_jobs_of 30

say "fault events of the cut-and-healed job:"
grep '"fault"' "$tmp/cut.jsonl" | jq -c 'del(.plan)' >&2
injected() { grep '"fault":"injected"' "$tmp/cut.jsonl" | grep "\"action\":\"$1\"" || true; }
for a in cut heal; do
  ev=$(injected $a)
  [[ -n $ev ]] && jq -e 'has("error") | not' <<<"$ev" >/dev/null || fail "no clean $a: $ev"
done
cut_at=$(injected cut | jq -r .time)
heal_at=$(injected heal | jq -r .time)
say "link down for $(awk -v a="$cut_at" -v b="$heal_at" 'BEGIN{printf "%.2f", b - a}') s"
if grep -E '"fault":"(detected|recovered|failed)"' "$tmp/cut.jsonl" >&2; then
  fail "the 2 s cut was handled as a loss"
fi

expect_equal_losses 30
expect_equal_weights
assert_clean "$tb_pid"
say "PASS"
