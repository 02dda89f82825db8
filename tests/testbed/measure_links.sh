#!/usr/bin/env bash
# Runs inside the testbed (as its `-- COMMAND`): measures links between the device namespaces.
# Usage: measure_links.sh ASTEROID_EXE OUT_FILE PORT FROM:TO:MBIT...
# For each FROM:TO pair, a raw TCP transfer (bash /dev/tcp in namespace FROM, a Perl receiver
# in namespace TO) of about 2.5 s at the configured MBIT; then `asteroid probe` over all nodes.
# Writes "tcp FROM TO MBIT MEASURED_MBIT" lines and the probe's cluster JSON (OUT_FILE.probe).
set -euo pipefail
exe=$1 out=$2 port=$3
shift 3
IFS=, read -r -a ns <<<"$ASTEROID_TESTBED_NAMESPACES"
IFS=, read -r -a ips <<<"$ASTEROID_TESTBED_IPS"
: >"$out"
for pair in "$@"; do
  IFS=: read -r a b mbit <<<"$pair"
  bytes=$(( mbit * 1000000 / 8 * 5 / 2 ))
  ip netns exec "${ns[b]}" perl -MIO::Socket::INET -e '
    my $s = IO::Socket::INET->new(LocalAddr => $ARGV[0], LocalPort => $ARGV[1], Listen => 1,
                                  ReuseAddr => 1) or die "listen: $!";
    my $c = $s->accept; my ($n, $r, $buf) = (0);
    while (($r = sysread($c, $buf, 65536)) > 0) { $n += $r }
    print "$n\n";' "${ips[b]}" "$port" >"$out.recv" &
  receiver=$!
  for _ in $(seq 100); do
    ip netns exec "${ns[b]}" ss -Hltn "sport = :$port" | grep -q . && break
    sleep 0.05
  done
  t0=$EPOCHREALTIME
  ip netns exec "${ns[a]}" bash -c "exec 3>/dev/tcp/${ips[b]}/$port && head -c $bytes /dev/zero >&3"
  wait "$receiver"
  t1=$EPOCHREALTIME
  got=$(<"$out.recv")
  (( got == bytes )) || { echo "receiver got $got of $bytes bytes" >&2; exit 1; }
  awk -v a="$a" -v b="$b" -v m="$mbit" -v n="$bytes" -v t0="$t0" -v t1="$t1" \
    'BEGIN { printf "tcp %d %d %s %.3f %d %.3f\n", a, b, m, n * 8 / (t1 - t0) / 1e6, n, t1 - t0 }' >>"$out"
done
rm -f "$out.recv"
IFS=, read -r -a nodes <<<"$ASTEROID_NODES"
"$exe" probe --nodes "${nodes[@]}" --bytes 1048576 --repeats 3 --credentials "$ASTEROID_CREDENTIALS" \
  -o "$out.probe"
