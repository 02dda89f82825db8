#!/usr/bin/env bash
# (f) A node's link is cut in the middle of a job (`cut` fault: the testbed's host-side veth goes
# down; no connection closes, the node just falls silent). The supervisor detects it by missed
# heartbeats within interval x misses + 1 s, replays the interrupted step without it, and every
# step's loss and the final weights and optimizer state (the jobs' checkpoints, max |difference|
# 1e-4) equal those of a fault-free run of the same job on the same testbed. The link is
# healed later (`heal` fault) without error; whether the node answers heartbeats again before
# the job ends depends on its TCP retransmission timer, so that is printed, not required. Then
# nothing remains.
source "$(dirname "$0")/common.sh"
tb_require_netns

hb_ms=200 misses=3
jq --arg m "$tmp/ref.jsonl" --argjson hb $hb_ms --argjson n $misses --arg c "$tmp/ref.ckpt" \
  '.max_steps = 40 | .epochs = 10 | .metrics = $m
   | .fault_tolerance = {"heartbeat_ms": $hb, "heartbeat_misses": $n, "checkpoint": $c}' \
  "$here/job-mlp.json" >"$tmp/ref.json"
jq --arg m "$tmp/cut.jsonl" --arg c "$tmp/cut.ckpt" \
  '.metrics = $m | .fault_tolerance.checkpoint = $c
   | .faults = [{"step": 6, "delay_ms": 20, "node": 1, "action": "cut"},
                {"step": 12, "node": 1, "action": "heal"}]' "$tmp/ref.json" >"$tmp/cut.json"
# Both jobs on one testbed: the reference first, then the cut (ASTEROID_NODES: the endpoints).
tb_run_jobs "$here/cluster-3dev.json" ref cut
expect_status 0 "reference and cut jobs"
expect_two_jobs_of 40

event() { grep "\"fault\":\"$1\"" "$tmp/cut.jsonl" | head -n 1; }
cut=$(event injected)
[[ $(jq -r '.action + " " + .interface' <<<"$cut") == "cut at${tb_pid}h1" ]] \
  || fail "the first injected fault is not a cut of at${tb_pid}h1: $cut"
jq -e 'has("error") | not' <<<"$cut" >/dev/null || fail "the cut failed: $cut"
detected=$(event detected)
[[ -n $detected ]] || fail "the cut was not detected: $(grep '"fault"' "$tmp/cut.jsonl")"
say "detected: $detected"
jq -e --argjson bound "$(awk -v h=$hb_ms -v n=$misses 'BEGIN{print h * n / 1000 + 1}')" \
  '.node == "slow-1" and (.reason | test("no heartbeat")) and .detect_s <= $bound' \
  <<<"$detected" >/dev/null || fail "not detected by heartbeats within the bound: $detected"
recovered=$(event recovered)
[[ -n $recovered ]] || fail "no recovery: $(grep '"fault"' "$tmp/cut.jsonl")"
# Replay from this job's snapshots, not from those the reference job left on the nodes.
jq -e '.resume_step <= .failed_step and .failed_step - .resume_step <= 1' <<<"$recovered" \
  >/dev/null || fail "did not replay from the step before the cut: $recovered"
heal=$(grep '"fault":"injected"' "$tmp/cut.jsonl" | grep '"action":"heal"' || true)
[[ -n $heal ]] && jq -e 'has("error") | not' <<<"$heal" >/dev/null || fail "no clean heal: $heal"
say "fault events of the cut job:"
grep '"fault"' "$tmp/cut.jsonl" | jq -c 'del(.plan)' >&2

# Synchronous replay: the cut is invisible to the math.
expect_equal_losses 40
expect_equal_weights
assert_clean "$tb_pid"
say "PASS"
