#!/usr/bin/env bash
# raw_pair_check.sh BENCH PORT
# The raw-TCP anchor's two sides as separate processes (as veth_streams.sh
# runs them, here on loopback): the receiver exits 0, the sender exits 0 and
# prints one positive Mbit/s figure. Every wait is bounded.
set -uo pipefail
bench=$1 port=$2
timeout 30 "$bench" --raw-receive "127.0.0.1:$port" --raw-bytes 65536 --raw-count 8 &
receiver=$!
for _ in $(seq 100); do
  listening=$(ss -Hltn "sport = :$port" || true)
  [[ -z $listening ]] || break
  sleep 0.05
done
[[ -n $listening ]] || { echo "raw_pair_check: the receiver does not listen on $port" >&2; exit 1; }
out=$(timeout 30 "$bench" --raw-send "127.0.0.1:$port" --raw-bytes 65536 --raw-count 8)
sent=$?
wait "$receiver"
received=$?
echo "sender exit $sent, receiver exit $received, output '$out'"
[[ $sent == 0 && $received == 0 ]] || exit 1
awk -v x="$out" 'BEGIN { exit !(x ~ /^[0-9]+(\.[0-9]+)?$/ && x > 0) }' \
  || { echo "raw_pair_check: expected one positive Mbit/s figure" >&2; exit 1; }
