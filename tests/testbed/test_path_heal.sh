#!/usr/bin/env bash
# (k) The path between two nodes fails in the middle of a job while both still answer the
# supervisor (as in (j): node 1's packets to node 2 dropped from its 6th step on) and heals once
# one of the two is lost for it. The supervisor probes the failed path again now and then (from
# the node at its other end, over the data plane, a wait of 1 s doubling while it fails); once
# a probe gets through, the lost node answers heartbeats again and is admitted at the next step
# boundary (a re-plan with it). Every step's loss and the final weights equal those of a
# fault-free run. Then nothing remains.
source "$(dirname "$0")/common.sh"
tb_require_netns

hb_ms=250 misses=4
# Long enough that the job outlives the probes: after the loss the planner's plan may take
# under 0.06 s a step (the first probe is due 1 s after the loss).
path_test_start 150
path_1_to_2_qdisc pfifo limit 0 || fail "cannot cut the path from node 1 to node 2"
say "path from node 1 to node 2 cut"
wait_for_lines "$tmp/cut.jsonl" '"fault":"detected"' 1 60
path_1_to_2_qdisc pfifo limit 1000 || fail "cannot heal the path from node 1 to node 2"
say "path healed after: $(grep '"fault":"detected"' "$tmp/cut.jsonl" | jq -c '{node, reason}')"
tb_wait 200
expect_status 0 "reference and path-cut jobs"
expect_two_jobs_of 150

say "fault events of the path-cut job:"
grep '"fault"' "$tmp/cut.jsonl" | jq -c 'del(.plan, .in_flight)' >&2
detected=$(grep '"fault":"detected"' "$tmp/cut.jsonl" | head -n 1)
lost=$(jq -r .node <<<"$detected")
jq -e '.reason | test("admitted again once a probe from .* gets through")' <<<"$detected" \
  >/dev/null || fail "the loss does not say the path is probed again: $detected"
healed=$(grep '"fault":"path_healed"' "$tmp/cut.jsonl" | head -n 1)
[[ -n $healed ]] || fail "no path_healed event: $(grep '"fault"' "$tmp/cut.jsonl")"
jq -e --arg n "$lost" '.node == $n' <<<"$healed" >/dev/null \
  || fail "path_healed names another node than the lost $lost: $healed"
rejoined=$(grep '"fault":"rejoined"' "$tmp/cut.jsonl" | head -n 1)
jq -e --arg n "$lost" '.nodes | index($n)' <<<"$rejoined" >/dev/null \
  || fail "$lost did not rejoin: $(grep '"fault"' "$tmp/cut.jsonl")"
back=$(awk -v a="$(jq -r .time <<<"$detected")" -v b="$(jq -r .time <<<"$rejoined")" \
  'BEGIN{printf "%.2f", b - a}')
say "$lost lost for the cut path, back in the job $back s later"

expect_equal_losses 150
expect_equal_weights
assert_clean "$tb_pid"
say "PASS"
