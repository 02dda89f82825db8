#!/usr/bin/env bash
# (m) The inference server under a real path failure: `asteroid serve` runs a given 3-stage cnn
# pipeline (fast-0 -> slow-1 -> slow-2) on the testbed, and the path from node 1 to node 2
# fails for good while both nodes still answer the server (node 1's packets to node 2 dropped,
# as in (j)). Node 1's data plane gives node 2 up and tells the server, which re-plans without
# the unreachable node within heartbeat x misses + 1 s of the cut and keeps answering; it does
# not take that node back on its heartbeats but probes the path from its other end, and once
# the path heals and a probe gets through the node is taken back (a re-plan over all three
# nodes again). Every answer's top-1 class equals that of a fault-free run of the same
# requests. Then nothing remains.
source "$(dirname "$0")/common.sh"
tb_require_netns

hb_ms=250 misses=4
# About 20 s of serving on this testbed (slow-1's two layers take ~7 ms a request): the cut,
# the loss, a failed probe, the heal and the node's return all fall inside it.
requests=1200
jq -n --argjson r "$requests" --argjson hb "$hb_ms" --argjson n "$misses" \
  '{model: "cnn", seed: 1, micro_batch: 8, requests: $r, dataset: "synthetic",
    plan: {stages: [{first_layer: 0, end_layer: 1, device: 0},
                    {first_layer: 1, end_layer: 3, device: 1},
                    {first_layer: 3, end_layer: 4, device: 2}]},
    heartbeat_ms: $hb, heartbeat_misses: $n, request_timeout_ms: 60000}' >"$tmp/serve.json"
cat >"$tmp/run-serves.sh" <<SCRIPT
set -euo pipefail
for run in ref cut; do
  jq --arg n "\$ASTEROID_NODES" --arg o "$tmp/\$run.outputs.jsonl" \
    '.nodes = (\$n | split(",")) | .outputs = \$o' "$tmp/serve.json" >"$tmp/\$run.json"
  "$exe" serve --config "$tmp/\$run.json" --credentials "\$ASTEROID_CREDENTIALS" \
    --metrics "$tmp/\$run.jsonl" >"$tmp/\$run.log" 2>&1
done
SCRIPT
tb_start --cluster "$here/cluster-3dev.json" -- bash "$tmp/run-serves.sh"
wait_for_lines "$tmp/cut.log" "server: serving on 3 stages" 1 150
sleep 2
cut_at=$(date +%s.%N)
path_1_to_2_qdisc pfifo limit 0 || fail "cannot cut the path from node 1 to node 2"
say "path from node 1 to node 2 cut"
wait_for_lines "$tmp/cut.log" "re-planning on the 2 nodes left" 1 60
# Cut for 3 s more: the first probe (1 s after the loss) fails.
sleep 3
path_1_to_2_qdisc pfifo limit 1000 || fail "cannot heal the path from node 1 to node 2"
say "path healed"
tb_wait 200
expect_status 0 "the fault-free and the path-cut serve"

say "server log of the path-cut serve:"
grep -E "server: " "$tmp/cut.log" >&2 || true
summary=$(jq -c 'select(.event == "done")' "$tmp/cut.jsonl")
[[ -n $summary ]] || fail "no summary in $tmp/cut.jsonl"
jq -c '.recoveries' <<<"$summary" >&2
lost=$(jq -c '.recoveries[0]' <<<"$summary")
jq -e '(.lost == "slow-1" or .lost == "slow-2")
       and (.why | test("cannot reach it over the data plane"))
       and (.why | test("taken back once a probe from .* gets through"))' <<<"$lost" >/dev/null \
  || fail "the first re-plan is not the loss of node 1 or 2 for the cut path: $lost"
name=$(jq -r .lost <<<"$lost")
back=$(jq -c '.recoveries[1]' <<<"$summary")
jq -e --arg n "$name" '.rejoined == $n and (.why | test("answers a probe again"))' <<<"$back" \
  >/dev/null || fail "$name was not taken back when a probe got through: $back"
(( $(jq '.recoveries | length' <<<"$summary") == 2 )) \
  || fail "more than a loss and a return: $(jq -c .recoveries <<<"$summary")"
jq -e '.stages | length == 3' <<<"$summary" >/dev/null \
  || fail "the last pipeline is not over the three nodes: $(jq -c '[.stages[].label]' <<<"$summary")"
jq -e --argjson r "$requests" '.requests == $r' <<<"$summary" >/dev/null \
  || fail "not every request answered: $(jq -c '{requests}' <<<"$summary")"

# When the server re-planned without the node, from its log (spdlog's local time, ms).
lost_line=$(grep -m 1 "re-planning on the 2 nodes left" "$tmp/cut.log")
lost_at=$(date -d "$(sed -E 's/^\[([^]]+)\].*/\1/' <<<"$lost_line")" +%s.%N)
after=$(awk -v a="$cut_at" -v b="$lost_at" 'BEGIN{printf "%.2f", b - a}')
bound=$(awk -v h=$hb_ms -v n=$misses 'BEGIN{print h * n / 1000 + 1}')
say "$name lost $after s after the cut (bound: heartbeat x misses + 1 s = $bound s)"
awk -v t="$after" -v b="$bound" 'BEGIN{exit !(t <= b)}' \
  || fail "lost $after s after the cut, not within $bound s"

(( $(wc -l <"$tmp/ref.outputs.jsonl") == requests )) \
  || fail "the fault-free serve wrote $(wc -l <"$tmp/ref.outputs.jsonl") answers of $requests"
cmp -s "$tmp/ref.outputs.jsonl" "$tmp/cut.outputs.jsonl" \
  || fail "answers differ from the fault-free serve's: $(diff "$tmp/ref.outputs.jsonl" \
       "$tmp/cut.outputs.jsonl" | head -n 4 | tr '\n' ' ')"
say "$requests answers equal to the fault-free serve's"
assert_clean "$tb_pid"
say "PASS"
