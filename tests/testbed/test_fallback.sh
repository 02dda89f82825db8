#!/usr/bin/env bash
# (e) Without namespaces (--no-netns, as when not root): loopback nodes, a clear warning, the job
# runs, nothing remains; the nodes pace their tensor traffic to the cluster's rates. Also: --help,
# --no-tls, and bad input gets a message naming the file and field.
# Needs neither root nor namespaces.
source "$(dirname "$0")/common.sh"

help=$(bash "$testbed" --help) && grep -q -- "--cluster FILE" <<<"$help" || fail "--help lacks --cluster"
expect_error() {  # expected-message-regex testbed-args...
  local regex=$1 out status=0
  shift
  out=$(bash "$testbed" --exe "$exe" --base-port "$port" "$@" 2>&1) || status=$?
  (( status == 1 )) && grep -qE -- "$regex" <<<"$out" \
    || fail "testbed $*: expected status 1 and /$regex/, got $status: $out"
}
echo '{"devices": [{"name": "a", "speed": 1, "memory": "1GiB"}, {"name": "b", "type": "nano9"}],
      "link_mbps": 10}' >"$tmp/bad-type.json"
expect_error "bad-type.json: devices\[1\]\.type: unknown type \"nano9\"" --cluster "$tmp/bad-type.json"
echo '{"devices": [{"name": "a", "speed": 1}], "link_mbps": 10}' >"$tmp/no-memory.json"
expect_error "no-memory.json: devices\[0\]\.memory: missing" --cluster "$tmp/no-memory.json"
echo '{"devices": [{"name": "a", "type": "jetson-nano"}, {"name": "b", "type": "jetson-tx2"}]}' \
  >"$tmp/no-links.json"
expect_error "no-links.json: link_mbps: missing" --cluster "$tmp/no-links.json"
expect_error "cluster file .*nope.json does not exist" --cluster "$tmp/nope.json"
expect_error "unknown argument '--frobnicate'" --cluster "$here/cluster-3dev.json" --frobnicate

tb_run --no-netns --cluster "$here/cluster-3dev.json" --job "$here/job-mlp.json"
expect_status 0 "testbed"
expect_output "WARNING: network namespaces not used \(--no-netns\)"
expect_output "falling back to 3 loopback nodes on 127\.0\.0\.1; links are NOT shaped by tc"
expect_output "each node paces the tensors it sends"
expect_output "job done: 6 steps"
assert_clean "$tb_pid"

# --no-tls: no credentials are made, the nodes run without them and the job connects without any.
tb_run --no-netns --no-tls --cluster "$here/cluster-3dev.json" --job "$here/job-mlp.json"
expect_status 0 "testbed (--no-tls)"
expect_output "WARNING: --no-tls: the nodes run without credentials"
expect_output "job done: 6 steps"
assert_clean "$tb_pid"

# Paced links in the fallback: a node's tensors leave at its uplink rate (node 1: 10 Mbit/s
# links only; node 2: one 40 Mbit/s link), measured by the probe on the data plane. An
# unpaced loopback link would read hundreds of Mbit/s; below the rate is CPU contention
# (35.7 of 40 Mbit/s while another testbed test ran beside this one on 2 cores), so the
# band is 0.75-1.2 x.
tb_run --no-netns --cluster "$here/cluster-links.json" -- bash -c \
  '"$0" probe --nodes ${ASTEROID_NODES//,/ } --bytes 262144 --repeats 3 --credentials "$ASTEROID_CREDENTIALS" -o "$1"' \
  "$exe" "$tmp/paced.json"
expect_status 0 "testbed (paced probe)"
expect_output "each node paces the tensors it sends"
# The probe names each node's device, budget and BLAS before the links.
expect_output "at 127\.0\.0\.1:[0-9]+: device cpu, budget [0-9.]+ [KMG]iB, [0-9]+ threads, slowdown [0-9.]+, BLAS [^ ]"
assert_clean "$tb_pid"
for link in "1 0 10" "1 2 10" "2 0 40"; do
  read -r a b mbit <<<"$link"
  got=$(jq -r ".bandwidth_mbps[$a][$b]" "$tmp/paced.json")
  awk -v m="$got" -v c="$mbit" 'BEGIN { exit !(m >= 0.75 * c && m <= 1.2 * c) }' \
    || fail "paced link $a -> $b: $got Mbit/s, configured $mbit (want 0.75-1.2 x)"
  say "paced link $a -> $b: $got Mbit/s (configured $mbit)"
done
# Time dilation: D = 2 halves every paced rate (and doubles every slowdown).
tb_run --no-netns --dilation 2 --cluster "$here/cluster-links.json" -- bash -c \
  '"$0" probe --nodes ${ASTEROID_NODES//,/ } --bytes 131072 --repeats 3 --credentials "$ASTEROID_CREDENTIALS" -o "$1"; echo "D=$ASTEROID_TESTBED_DILATION"' \
  "$exe" "$tmp/dilated.json"
expect_status 0 "testbed (dilated probe)"
expect_output "time dilation D = 2: compute x 2, link rates / 2"
expect_output "D=2"
assert_clean "$tb_pid"
got=$(jq -r ".bandwidth_mbps[1][0]" "$tmp/dilated.json")
awk -v m="$got" 'BEGIN { exit !(m >= 3.75 && m <= 6) }' \
  || fail "dilated link 1 -> 0: $got Mbit/s, want 5 (10 / D; 0.75-1.2 x as above)"
say "dilated link 1 -> 0: $got Mbit/s (10 Mbit/s at D = 2)"
expect_error "--dilation 0.5: expected a number >= 1 or 'auto'" --cluster "$here/cluster-3dev.json" \
  --no-netns --dilation 0.5
say "PASS"
