#!/usr/bin/env bash
# Runs inside the testbed (scripts/testbed.sh ... -- THIS EXE PORT REPEATS BENCH [ANCHORS]), two devices in
# their own network namespaces, links not shaped: streams of 1 MiB and 16 MiB tensors from node 0
# to node 1 on the data plane (`asteroid probe --stream`), and between the same two namespaces
# over the same veths and bridge iperf3 and the raw-TCP anchor (BENCH, runtime_bench
# --raw-send/--raw-receive: the stream's own distinct payloads over one connection, nothing
# else), interleaved, REPEATS rounds (the data plane first in even rounds, last in odd ones).
# Prints one line per stream: "veth SIZE_MIB DATA_PLANE_MBIT IPERF3_3S_MBIT IPERF3_BURST_MBIT
# RAW_TCP_MBIT" (the burst: the stream's bytes, -n, on a fresh connection). runtime_bench reads
# them. ANCHORS "no-anchors" measures the data plane's streams only and prints 0 for the anchors
# (runtime_bench's TLS testbed, whose anchors it does not use; default "anchors").
set -euo pipefail
exe=$1 port=$2 repeats=$3 bench=$4 anchors=${5:-anchors}
[[ $anchors == anchors || $anchors == no-anchors ]] \
  || { echo "veth_streams: ANCHORS is 'anchors' or 'no-anchors' (got '$anchors')" >&2; exit 2; }
[[ ${ASTEROID_TESTBED_MODE:-} == netns ]] \
  || { echo "veth_streams: the testbed runs without namespaces (${ASTEROID_TESTBED_MODE:-?})" >&2
       exit 3; }
IFS=, read -r -a ns <<<"$ASTEROID_TESTBED_NAMESPACES"
IFS=, read -r -a ips <<<"$ASTEROID_TESTBED_IPS"
IFS=, read -r -a nodes <<<"$ASTEROID_NODES"
credentials=()
[[ -z ${ASTEROID_CREDENTIALS:-} ]] || credentials=(--credentials "$ASTEROID_CREDENTIALS")
errors=$(mktemp)
trap 'rm -f "$errors"' EXIT

# Waits (up to 5 s) until something listens on $port in namespace 1.
await_listener() {
  local listening
  for _ in $(seq 100); do
    # Captured, not piped into grep -q: under pipefail a pipe closed early
    # would read as "not listening".
    listening=$(ip netns exec "${ns[1]}" ss -Hltn "sport = :$port" || true)
    [[ -z $listening ]] || return 0
    sleep 0.05
  done
  return 1
}

# Mbit/s that iperf3 moves from namespace 0 to namespace 1 with the given
# length option (-t SECONDS or -n BYTES), against a one-off server.
iperf3_mbit() {
  ip netns exec "${ns[1]}" timeout 20 iperf3 -s -1 -B "${ips[1]}" -p "$port" >/dev/null 2>&1 &
  local server=$!
  await_listener || true # iperf3's own error says what went wrong
  ip netns exec "${ns[0]}" timeout 20 iperf3 -c "${ips[1]}" -p "$port" -l 1M "$@" -J \
    | jq '.end.sum_received.bits_per_second / 1e6'
  wait "$server" || true
}

# Mbit/s of the raw-TCP anchor's second stream of COUNT payloads of BYTES
# from namespace 0 to namespace 1.
raw_mbit() {
  ip netns exec "${ns[1]}" timeout 30 "$bench" --raw-receive "${ips[1]}:$port" \
    --raw-bytes "$1" --raw-count "$2" &
  local receiver=$!
  await_listener || { echo "veth_streams: the raw-TCP receiver does not listen" >&2; exit 1; }
  local mbit
  mbit=$(ip netns exec "${ns[0]}" timeout 30 "$bench" --raw-send "${ips[1]}:$port" \
           --raw-bytes "$1" --raw-count "$2") \
    || { echo "veth_streams: the raw-TCP sender failed" >&2; exit 1; }
  wait "$receiver" || { echo "veth_streams: the raw-TCP receiver failed" >&2; exit 1; }
  echo "$mbit"
}

for (( r = 0; r < repeats; ++r )); do
  for mib in 1 16; do
    # As runtime_bench's loopback streams: about 64 MiB per stream.
    count=$(( mib == 1 ? 64 : 4 ))
    # iperf3 writes at most 1 MiB at a time: 3 s over one persistent
    # connection, then exactly the stream's bytes on a fresh one (a burst
    # against a burst). The order turns round every round: what ran just
    # before a measurement moves it (the raw anchor read higher right after
    # iperf3's 3 s than in turns of its own with the data plane).
    anchor=0 burst=0 raw=0
    if [[ $anchors == anchors ]] && (( r % 2 == 1 )); then
      raw=$(raw_mbit $(( mib << 20 )) "$count")
      burst=$(iperf3_mbit -n $(( count * mib ))M)
      anchor=$(iperf3_mbit -t 3)
    fi
    if ! probe=$("$exe" probe --nodes "${nodes[0]}" "${nodes[1]}" --stream "$count" \
                   --bytes $(( mib << 20 )) "${credentials[@]}" 2>"$errors"); then
      echo "veth_streams: the probe failed: $(tail -n 3 "$errors")" >&2
      exit 1
    fi
    dp=$(jq '.bandwidth_mbps[0][1]' <<<"$probe")
    if [[ $anchors == anchors ]] && (( r % 2 == 0 )); then
      anchor=$(iperf3_mbit -t 3)
      burst=$(iperf3_mbit -n $(( count * mib ))M)
      raw=$(raw_mbit $(( mib << 20 )) "$count")
    fi
    echo "veth $mib $dp $anchor $burst $raw"
  done
done
