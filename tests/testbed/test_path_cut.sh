#!/usr/bin/env bash
# (j) The path between two nodes fails for good in the middle of a job while both still answer
# the supervisor: node 1's packets to node 2 are dropped from its 6th step on (its HTB class
# towards node 2 gets a queue of length 0: silent, no reset, TCP acknowledgements from node 1
# to node 2 lost too), and heartbeats go on. The data plane notices (TCP_USER_TIMEOUT), tries
# to connect again for its heal timeout, gives up and tells the supervisor, which handles it as
# the loss of the unreachable device: a recovery, not a job failure at the step timeout; that
# device stays out of the job while the path fails (not taken back on its heartbeats). The job's claim sets how long
# the data plane tries (its heartbeat window and one interval: 625 ms of silence, then 625 ms to
# connect again), so the loss is found within heartbeat x misses + 1 s of the cut, as a silent
# node would be. Every step's loss and the final weights equal those of a fault-free run. Then
# nothing remains.
source "$(dirname "$0")/common.sh"
tb_require_netns

hb_ms=250 misses=4
path_test_start 30
path_1_to_2_qdisc pfifo limit 0 || fail "cannot cut the path from node 1 to node 2"
# The cut came after the last step on record now (the job's clock: its metrics' "time").
cut_at=$(jq -R -r 'fromjson? | select(.event == "iteration") | .time' "$tmp/cut.jsonl" | tail -n 1)
say "path from node 1 to node 2 cut"
tb_wait 200
expect_status 0 "reference and path-cut jobs"
expect_two_jobs_of 30

say "fault events of the path-cut job:"
grep '"fault"' "$tmp/cut.jsonl" | jq -c 'del(.plan)' >&2
detected=$(grep '"fault":"detected"' "$tmp/cut.jsonl" | head -n 1)
[[ -n $detected ]] || fail "the path cut was not detected: $(grep '"fault"' "$tmp/cut.jsonl")"
jq -e '(.node == "slow-1" or .node == "slow-2")
       and (.reason | test("cannot reach .* over the data plane"))' <<<"$detected" >/dev/null \
  || fail "not detected as an unreachable peer of node 1 or 2: $detected"
grep -q '"fault":"recovered"' "$tmp/cut.jsonl" || fail "no recovery"
# The lost node still answers heartbeats; it stays out while its path fails (admitted again on
# its heartbeats, it would stall the job on the same path): not pinged, not reported answering
# again, and the probes of the path that never heals never get through (test_path_heal.sh).
lost=$(jq -r .node <<<"$detected")
jq -e '.reason | test("admitted again once a probe from .* gets through")' <<<"$detected" \
  >/dev/null || fail "the loss does not say the node stays out until a probe gets through: $detected"
if grep '"fault":"answering_again"' "$tmp/cut.jsonl" | grep -q "\"node\":\"$lost\""; then
  fail "$lost was taken back on its heartbeats: $(grep answering_again "$tmp/cut.jsonl")"
fi
if grep -q '"fault":"path_healed"' "$tmp/cut.jsonl"; then
  fail "a probe got through a path that stays cut: $(grep path_healed "$tmp/cut.jsonl")"
fi
# Counted from the last step on record when tc returned: at most one step (some ms) early.
after=$(awk -v a="$cut_at" -v b="$(jq -r .time <<<"$detected")" 'BEGIN{printf "%.2f", b - a}')
bound=$(awk -v h=$hb_ms -v n=$misses 'BEGIN{print h * n / 1000 + 1}')
step_s=$(jq -R -r 'fromjson? | select(.event == "iteration") | .time' "$tmp/ref.jsonl" \
  | awk 'NR > 1 { d += $1 - p; n++ } { p = $1 } END { printf "%.3f", n ? d / n : 0 }')
say "detected $after s after the cut (bound: heartbeat x misses + 1 s = $bound s; a step of" \
  "the fault-free run takes $step_s s)"
awk -v t="$after" -v b="$bound" 'BEGIN{exit !(t <= b)}' \
  || fail "detected $after s after the cut, not within $bound s"

expect_equal_losses 30
expect_equal_weights
assert_clean "$tb_pid"
say "PASS"
