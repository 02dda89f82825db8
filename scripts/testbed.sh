#!/usr/bin/env bash
# Emulated edge testbed (issue #6): one `asteroid node` per device of a cluster file, each in its
# own network namespace behind a shaped link, then a job (or any command) against those nodes.
#
# Usage:
#   scripts/testbed.sh --cluster FILE [options] [--job JOB.json | -- COMMAND [ARG...]]
#   scripts/testbed.sh --cleanup [ID]
#
#   With --job, the job's "nodes" are replaced by the testbed's endpoints and
#   `asteroid job --config` runs it. With `-- COMMAND`, the command runs with ASTEROID_NODES set.
#   With neither, the nodes run until Ctrl-C (or until one of them exits).
#
# Options:
#   --cluster FILE      cluster file (docs/planner.md: devices with type or speed and memory;
#                       link_mbps or a bandwidth_mbps matrix, row = sender; optional latency_ms)
#   --exe PATH          the asteroid program (default: build/apps/asteroid)
#   --base-port P       node i listens on port P+i (default 27700)
#   --job FILE          run this job file on the nodes
#   --link-mbps R       override the cluster's bandwidth: every link R Mbit/s
#   --delay-ms D        override the cluster's latency: D ms one way on every link
#   --loss PCT          drop PCT % of the packets on every path (once per path)
#   --threads T         LibTorch threads per node (default 1)
#   --dilation D|auto   time dilation: slowdowns x D, link rates / D, latencies x D (emulated time =
#                       wall time / D); auto: smallest D >= 1 that keeps the devices' compute within
#                       --cpu-budget cores; printed, and exported to the command as
#                       ASTEROID_TESTBED_DILATION (default 1: none)
#   --cpu-budget C      cores the devices may use at once, for --dilation auto (default 1.5)
#   --speeds relative|absolute
#                       relative (default): the fastest device computes at this machine's speed
#                       and the others are padded by their speed ratio to it; absolute: every
#                       device is padded to its own time per sample of --model (the cluster
#                       file's "seconds_per_sample", else its catalog type's, from the paper),
#                       against this machine's, measured at start (`asteroid devices --model`)
#   --model M           the model of --speeds absolute (default: the --job file's "model")
#   --batch B           the batch this machine's time per sample is measured at (default: the
#                       --job file's "batch_size", else 32)
#   --keep-logs DIR     write the node logs to DIR and keep them (default: a temp folder, removed)
#   --ready-timeout S   seconds to wait for each node's "listening on" (default 60)
#   --no-netns          do not use namespaces: loopback nodes, no link shaping
#   --no-shape          namespaces, but no tc shaping (full veth speed)
#   --no-tls            no credentials: the nodes run without TLS (`--insecure` on the
#                       namespaces' addresses, on a bridge of this machine: reachable from
#                       elsewhere only if this machine routes 198.18.0.0/15), the job or command
#                       connects without credentials (ASTEROID_CREDENTIALS empty); for measuring
#                       what TLS costs
#   --cleanup [ID]      remove what testbeds left behind after a SIGKILL (namespaces, veths,
#                       bridges, processes in those namespaces, temp folders): every testbed whose
#                       script is gone, or the one with this ID; then exit
#   -h, --help          this text
#
# What is emulated (see docs/benchmarks.md, "Emulated testbed"):
#   - device i runs `asteroid node --slowdown F_i --memory M_i` where F_i = (max speed over the
#     devices) / speed_i: the fastest device computes at this machine's speed, slower ones are
#     padded (emulated slowdown, not a real slower CPU); with --speeds absolute, F_i = (device
#     i's seconds per sample) / (this machine's), and a device faster than this machine raises
#     the time dilation to at least 1 / F_i; M_i is the cluster's memory budget (the catalog
#     default for a known type), which the node reports to the planner;
#   - device i lives in namespace asteroid-ID-i at 198.18.X.(10+i) (198.18.0.0/15 is the
#     benchmarking range, RFC 2544), connected by a veth pair to the bridge atIDb (198.18.X.1),
#     where the supervisor (the job, in the root namespace) reaches it; the node reports the
#     bridge-side end (`asteroid node --link-interface`), which the job's `cut` / `heal` faults
#     take down and up (a silent link cut: no connection is closed);
#   - links, with tc (HTB + netem), as in the cluster file: on the namespace side of the veth,
#     one class per destination device j at bandwidth[i][j] with latency[i][j] one way, under
#     an uplink of max_j bandwidth[i][j]; on the bridge side (into the device), a downlink of
#     max_j bandwidth[j][i]; traffic between a device and the supervisor gets the device's
#     uplink/downlink rate and its mean latency; --loss applies once on every path.
#   Not emulated: the host's cores are shared by all devices (no CPU isolation; --dilation
#   spreads their demand), no GPU.
#
# Without root, or when `ip netns add` fails, it falls back to loopback nodes (127.0.0.1; slowdown
# and memory still apply) and says so; there each node paces the tensors it sends to its uplink
# rate (`asteroid node --link-rate`, on the data plane) unless --no-shape; control messages,
# delay and loss are then not emulated. Everything it created (node
# processes, anything else running in its namespaces, the job, veths, bridge, qdiscs,
# namespaces) is removed on exit, on Ctrl-C / SIGTERM / SIGHUP, and when a node dies while no
# job runs. A node that dies during a job is reported; the job recovers or fails on its own.
# SIGKILL of this script cannot be trapped: nodes die with it (parent-death signal), the
# network pieces stay until `scripts/testbed.sh --cleanup`.
#
# Environment of `-- COMMAND`: ASTEROID_NODES (HOST:PORT,...), ASTEROID_TESTBED_ID,
# ASTEROID_TESTBED_MODE (netns or loopback), ASTEROID_TESTBED_NAMESPACES (comma-separated,
# empty in loopback mode), ASTEROID_TESTBED_IPS, ASTEROID_TESTBED_NODE_PIDS,
# ASTEROID_TESTBED_LOG_DIR, ASTEROID_TESTBED_DILATION, ASTEROID_CREDENTIALS (the member folder
# to connect to the nodes with: `asteroid job/probe --credentials "$ASTEROID_CREDENTIALS"`; the
# nodes accept only TLS with the testbed's throw-away credentials; empty with --no-tls). The
# command runs in its own
# session (setsid).
#
# Exit status: the job's or the command's; 128+N after signal N; 1 on a setup error or when a
# node dies while no job runs.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if (( BASH_VERSINFO[0] < 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] < 1) )); then
  echo "testbed: error: needs bash >= 5.1 (wait -n -p), this is $BASH_VERSION" >&2
  exit 1
fi

usage() {
  sed -n '2,/^set -euo pipefail$/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}
log() { echo "testbed: $*" >&2; }
die() { log "error: $*"; exit 1; }

# -- arguments ------------------------------------------------------------------------------------
cluster=""
exe="$root/build/apps/asteroid"
base_port=27700
job=""
link_mbps=""
delay_ms=""
loss=""
threads=1
dilation=1
cpu_budget=1.5
speeds=relative
speed_model=""
speed_batch=""
keep_logs=""
ready_timeout=60
use_netns=1
shape=1
tls=1
cleanup_mode=""
cleanup_id=""
command=()

need_value() { [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value (see --help)"; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --cluster) need_value "$@"; cluster=$2; shift 2 ;;
    --exe) need_value "$@"; exe=$2; shift 2 ;;
    --base-port) need_value "$@"; base_port=$2; shift 2 ;;
    --job) need_value "$@"; job=$2; shift 2 ;;
    --link-mbps) need_value "$@"; link_mbps=$2; shift 2 ;;
    --delay-ms) need_value "$@"; delay_ms=$2; shift 2 ;;
    --loss) need_value "$@"; loss=$2; shift 2 ;;
    --threads) need_value "$@"; threads=$2; shift 2 ;;
    --dilation) need_value "$@"; dilation=$2; shift 2 ;;
    --cpu-budget) need_value "$@"; cpu_budget=$2; shift 2 ;;
    --speeds) need_value "$@"; speeds=$2; shift 2 ;;
    --model) need_value "$@"; speed_model=$2; shift 2 ;;
    --batch) need_value "$@"; speed_batch=$2; shift 2 ;;
    --keep-logs) need_value "$@"; keep_logs=$2; shift 2 ;;
    --ready-timeout) need_value "$@"; ready_timeout=$2; shift 2 ;;
    --no-netns) use_netns=0; shift ;;
    --no-shape) shape=0; shift ;;
    --no-tls) tls=0; shift ;;
    --cleanup)
      cleanup_mode=1; shift
      if [[ $# -gt 0 && $1 =~ ^[0-9]+$ ]]; then cleanup_id=$1; shift; fi ;;
    -h|--help) usage; exit 0 ;;
    --) shift; command=("$@"); break ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

is_number() { [[ $1 =~ ^[0-9]+([.][0-9]+)?$ ]]; }
is_int() { [[ $1 =~ ^[0-9]+$ ]]; }

# -- removal of a testbed's network pieces (also used by --cleanup) -------------------------------
# Kills whatever still runs in the namespaces, then deletes veths, namespaces and the bridge of
# testbed `id` (names: namespaces asteroid-ID-I, links atIDb, atIDhI, atIDnI).
remove_network() {
  local id=$1 ns pids link left=0
  local namespaces links
  namespaces=$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^asteroid-$id-[0-9]+\$" || true)
  for ns in $namespaces; do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -n $pids ]] && kill -KILL $pids 2>/dev/null || true
  done
  for ns in $namespaces; do
    for _ in $(seq 50); do
      [[ -z $(ip netns pids "$ns" 2>/dev/null || true) ]] && break
      sleep 0.1
    done
  done
  links=$(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' \
          | grep -E "^at$id[bhn][0-9]*\$" || true)
  for link in $links; do
    [[ $link == "at${id}b" ]] && continue
    ip link del "$link" 2>/dev/null || true
  done
  for ns in $namespaces; do
    ip netns del "$ns" 2>/dev/null || { log "warning: cannot delete namespace $ns"; left=1; }
  done
  ip link show "at${id}b" >/dev/null 2>&1 && { ip link del "at${id}b" 2>/dev/null || left=1; }
  return $left
}

# What is left of testbed `id` (namespaces, links, processes in them); empty when clean.
leftovers() {
  local id=$1
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^asteroid-$id-[0-9]+\$" \
    | sed 's/^/namespace /' || true
  ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' \
    | grep -E "^at$id[bhn][0-9]*\$" | sed 's/^/link /' || true
}

if [[ -n $cleanup_mode ]]; then
  ids=$( { ip netns list 2>/dev/null | awk '{print $1}' | sed -nE 's/^asteroid-([0-9]+)-[0-9]+$/\1/p'
           ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' \
             | sed -nE 's/^at([0-9]+)[bhn][0-9]*$/\1/p'
           ls -d "${TMPDIR:-/tmp}"/asteroid-testbed-* 2>/dev/null \
             | sed -nE 's/.*asteroid-testbed-([0-9]+)\.[^/]*$/\1/p'; } 2>/dev/null | sort -u || true)
  n=0
  for id in $ids; do
    if [[ -n $cleanup_id ]]; then
      [[ $id == "$cleanup_id" ]] || continue
    elif kill -0 "$id" 2>/dev/null && grep -q testbed "/proc/$id/cmdline" 2>/dev/null; then
      log "testbed $id is still running (pid $id): left alone"
      continue
    fi
    log "removing testbed $id"
    if [[ $(id -u) -eq 0 ]]; then remove_network "$id" || true; fi
    rm -rf "${TMPDIR:-/tmp}/asteroid-testbed-$id".*
    n=$((n + 1))
  done
  log "cleanup: removed $n testbed(s)"
  exit 0
fi

# -- checks ---------------------------------------------------------------------------------------
[[ -n $cluster ]] || die "--cluster FILE is required (see --help)"
[[ -f $cluster ]] || die "cluster file $cluster does not exist"
[[ -z $job || -f $job ]] || die "job file $job does not exist"
[[ -z $job || ${#command[@]} -eq 0 ]] || die "give --job or -- COMMAND, not both"
[[ -x $exe ]] || die "asteroid program $exe not found or not executable (build it, or --exe)"
command -v jq >/dev/null || die "jq is missing (scripts/setup.sh installs it)"
is_int "$base_port" && (( base_port >= 1024 && base_port <= 65000 )) \
  || die "--base-port $base_port: expected a port in 1024-65000"
is_int "$threads" && (( threads >= 1 )) || die "--threads $threads: expected a positive integer"
is_int "$ready_timeout" || die "--ready-timeout $ready_timeout: expected seconds"
[[ -z $link_mbps ]] || { is_number "$link_mbps" && [[ $link_mbps != 0 ]]; } \
  || die "--link-mbps $link_mbps: expected a positive number"
[[ -z $delay_ms ]] || is_number "$delay_ms" || die "--delay-ms $delay_ms: expected a number >= 0"
[[ -z $loss ]] || { is_number "$loss" && awk -v l="$loss" 'BEGIN{exit !(l < 100)}'; } \
  || die "--loss $loss: expected a percentage in [0, 100)"
[[ $speeds == relative || $speeds == absolute ]] \
  || die "--speeds $speeds: expected 'relative' or 'absolute'"
[[ $speeds == absolute || -z $speed_model$speed_batch ]] \
  || die "--model and --batch go with --speeds absolute"

# -- the cluster, with jq -------------------------------------------------------------------------
# One line per device: name, slowdown, memory, uplink bit/s, downlink bit/s, latency to the
# supervisor (us); then one line per ordered pair: "pair", i, j, bit/s, latency (us).
# The catalog mirrors planner/src/device_catalog.cpp (speed relative to jetson-nano, budget).
read -r -d '' cluster_jq <<'JQ' || true
def tx2: ((22 / 8.5) * (26.7 / 11.2)) | sqrt;
def catalog: {"jetson-nano": {speed: 1.0, memory: "3GiB"},
              "jetson-tx2": {speed: tx2, memory: "7GiB"},
              "xavier-nx": {speed: (tx2 * 384 * 1100 / (256 * 1300)), memory: "7GiB"}};
def fail(msg): error("\($file): \(msg)");
def matrix(name; n): if (type == "array" and length == n and all(.[]; type == "array" and length == n
                         and all(.[]; type == "number" and . >= 0)))
                     then . else fail("\(name): expected a \(n)x\(n) matrix of numbers >= 0") end;
if type != "object" then fail("expected an object") else . end
| if (.devices | type) != "array" or (.devices | length) == 0
  then fail("devices: expected a non-empty list") else . end
| (.devices | length) as $n
| [.devices | to_entries[] | .key as $i | .value as $d
   | ($d.name // "device-\($i)") as $name
   | if ($name | test("^[A-Za-z0-9._-]+$") | not)
     then fail("devices[\($i)].name: \"\($name)\": use letters, digits, . _ -") else . end
   | (if $d.speed != null then
        (if ($d.speed | type) == "number" and $d.speed > 0 then $d.speed
         else fail("devices[\($i)].speed: expected a positive number") end)
      elif $d.type != null and catalog[$d.type] != null then catalog[$d.type].speed
      elif $d.type != null then
        fail("devices[\($i)].type: unknown type \"\($d.type)\" (known: "
             + (catalog | keys | join(", ")) + "); give \"speed\"")
      else fail("devices[\($i)]: expected \"type\" (from the catalog) or \"speed\"") end) as $speed
   | (if $d.memory != null then ($d.memory | tostring)
      elif $d.type != null and catalog[$d.type] != null then catalog[$d.type].memory
      else fail("devices[\($i)].memory: missing (required when the type is not in the catalog)")
      end) as $mem
   | {name: $name, speed: $speed, memory: $mem}] as $devs
| ($devs | group_by(.name) | map(select(length > 1) | .[0].name)) as $dups
| if ($dups | length) > 0 then fail("devices: duplicate name \"\($dups[0])\"") else . end
| (if $link != "" then [range($n) | [range($n) | ($link | tonumber)]]
   elif .link_mbps != null then
     (if (.link_mbps | type) == "number" and .link_mbps > 0 then .link_mbps
      else fail("link_mbps: expected a positive number") end) as $u | [range($n) | [range($n) | $u]]
   elif .bandwidth_mbps != null then .bandwidth_mbps | matrix("bandwidth_mbps"; $n)
   else fail("link_mbps: missing (give \"link_mbps\" or a \"bandwidth_mbps\" matrix)") end) as $bw
| (if $delay != "" then [range($n) | [range($n) | ($delay | tonumber)]]
   elif .latency_ms == null then [range($n) | [range($n) | 0]]
   elif (.latency_ms | type) == "number" and .latency_ms >= 0 then
     .latency_ms as $l | [range($n) | [range($n) | $l]]
   else .latency_ms | matrix("latency_ms"; $n) end) as $lat
| ($devs | map(.speed) | max) as $fastest
| ([range($n) as $i | range($n) as $j | select($i != $j) | $bw[$i][$j] | select(. <= 0)]
   | length) as $zero
| if $zero > 0 then fail("bandwidth_mbps: a link between two devices is 0") else . end
| def others($i): [range($n) | select(. != $i)];
  def bits(m): (m * 1e6 | floor);
  (range($n) as $i
   | (if $n > 1 then [others($i)[] as $j | $bw[$i][$j]] | max
      elif $bw[0][0] > 0 then $bw[0][0] else 1000 end) as $up
   | (if $n > 1 then [others($i)[] as $j | $bw[$j][$i]] | max
      elif $bw[0][0] > 0 then $bw[0][0] else 1000 end) as $down
   | (if $n > 1 then ([others($i)[] as $j | $lat[$i][$j]] | add / length) else $lat[0][0] end) as $sup
   | [$devs[$i].name, ($fastest / $devs[$i].speed * 10000 | round / 10000 | tostring),
      $devs[$i].memory, bits($up), bits($down), ($sup * 1000 | round)] | map(tostring) | join("\t")),
  (range($n) as $i | others($i)[] as $j
   | ["pair", $i, $j, bits($bw[$i][$j]), ($lat[$i][$j] * 1000 | round)] | map(tostring) | join("\t"))
JQ

if ! plan_text=$(jq -r --arg file "$cluster" --arg link "$link_mbps" --arg delay "$delay_ms" \
                   "$cluster_jq" "$cluster" 2>&1); then
  plan_text=$(sed -E 's/^jq: error \(at [^)]*\): //' <<<"$plan_text" | head -n 3)
  [[ $plan_text == "$cluster:"* ]] || plan_text="$cluster: $plan_text"
  die "$plan_text"
fi
names=() slowdowns=() memories=() up_bits=() down_bits=() sup_us=()
declare -A pair_bits=() pair_us=()
while IFS=$'\t' read -r a b c d e f; do
  if [[ $a == pair ]]; then
    pair_bits[$b,$c]=$d; pair_us[$b,$c]=$e
  else
    names+=("$a"); slowdowns+=("$b"); memories+=("$c"); up_bits+=("$d"); down_bits+=("$e")
    sup_us+=("$f")
  fi
done <<<"$plan_text"
n=${#names[@]}
(( n >= 1 && n <= 200 )) || die "$cluster: expected 1 to 200 devices, got $n"
(( base_port + n - 1 <= 65535 )) || die "--base-port $base_port: ports would exceed 65535"
loss_given=$loss
loss=${loss:-0}

# -- absolute speeds ------------------------------------------------------------------------------
# Each device is padded to its own time per sample of the model, whatever this machine's speed:
# slowdown = device's seconds per sample / this machine's, which `asteroid devices` measures with
# the nodes' thread count (one source for the catalog's figures: planner/src/device_catalog.cpp).
# A device faster than this machine (slowdown < 1) cannot be emulated at wall-clock speed: the
# time dilation must be at least 1 / its slowdown.
min_dilation=1
if [[ $speeds == absolute ]]; then
  # The job's model options (its input size) are what its nodes compute: this machine is measured
  # on them, and `asteroid devices` refuses them where they contradict the input of a catalog
  # figure (ResNet-50's are for 3x224x224). Without a job, the catalog figures' input.
  speed_options=()
  if [[ -n $job ]]; then
    [[ -n $speed_model ]] || speed_model=$(jq -r '.model // empty' "$job" 2>/dev/null || true)
    [[ -n $speed_batch ]] || speed_batch=$(jq -r '.batch_size // empty' "$job" 2>/dev/null || true)
    speed_options=(--model-options "$(jq -c '.model_options // {}' "$job" 2>/dev/null || echo '{}')")
  fi
  [[ -n $speed_model ]] || die "--speeds absolute needs --model (or a --job file with \"model\")"
  speed_batch=${speed_batch:-32}
  is_int "$speed_batch" && (( speed_batch >= 1 )) \
    || die "--batch $speed_batch: expected a positive integer"
  log "measuring this machine's time per sample of $speed_model at batch $speed_batch" \
      "($threads thread(s), cached after the first time)"
  speeds_json=$("$exe" --log-level warn devices --cluster "$cluster" --model "$speed_model" \
                  "${speed_options[@]}" --batch "$speed_batch" --threads "$threads" --json) \
    || die "cannot give the devices of $cluster absolute speeds for $speed_model (above)"
  mapfile -t absolute < <(jq -r '.devices[].speed' <<<"$speeds_json")
  (( ${#absolute[@]} == n )) || die "asteroid devices gave ${#absolute[@]} speeds for $n devices"
  for (( i = 0; i < n; ++i )); do
    slowdowns[i]=$(awk -v s="${absolute[i]}" 'BEGIN { printf "%.4g", 1 / s }')
  done
  # Rounded up, so that D x the smallest slowdown stays >= 1 when printed.
  min_dilation=$(printf '%s\n' "${slowdowns[@]}" |
                 awk 'NR == 1 || $1 < m { m = $1 }
                      END { printf "%.4g", m < 1 ? 1 / m * 1.0005 : 1 }')
  log "absolute speeds: this machine $(jq -r '.host_seconds_per_sample * 1000' <<<"$speeds_json")" \
      "ms per $speed_model sample (batch $speed_batch); slowdowns ${slowdowns[*]}" \
      "(devices ${names[*]})"
fi

# -- time dilation (docs/benchmarks.md, "Time dilation") ------------------------------------------
# One factor D: every device computes D times slower (slowdown x D) and every link carries 1/D of
# its rate with D times its latency, so emulated time = wall time / D. "auto": the smallest D >= 1
# with which the devices, all busy at once, need at most --cpu-budget cores (sum of 1/slowdown).
# With absolute speeds, also at least min_dilation (above).
if [[ $dilation == auto ]]; then
  dilation=$(printf '%s\n' "${slowdowns[@]}" |
             awk -v b="$cpu_budget" -v m="$min_dilation" \
               '{ d += 1 / $1 } END { x = d / b; if (x < m) x = m; printf "%.4g", x < 1 ? 1 : x }')
fi
is_number "$dilation" && awk -v d="$dilation" 'BEGIN { exit !(d >= 1) }' \
  || die "--dilation $dilation: expected a number >= 1 or 'auto'"
awk -v d="$dilation" -v m="$min_dilation" 'BEGIN { exit !(d >= m * 0.9999) }' \
  || die "--dilation $dilation: a device is faster than this machine for $speed_model; give" \
         "--dilation $min_dilation or more, or auto"
if [[ $dilation != 1 ]]; then
  scale() { awk -v x="$1" -v f="$2" 'BEGIN { printf "%.0f", x * f }'; }
  divide() { awk -v x="$1" -v f="$2" 'BEGIN { printf "%.0f", x / f }'; }
  for (( i = 0; i < n; ++i )); do
    # At least 1 (a node refuses less): D may be rounded below 1 / the smallest slowdown.
    slowdowns[i]=$(awk -v s="${slowdowns[i]}" -v d="$dilation" \
                     'BEGIN { x = s * d; printf "%g", x < 1 ? 1 : x }')
    up_bits[i]=$(divide "${up_bits[i]}" "$dilation")
    down_bits[i]=$(divide "${down_bits[i]}" "$dilation")
    sup_us[i]=$(scale "${sup_us[i]}" "$dilation")
  done
  for k in "${!pair_bits[@]}"; do
    pair_bits[$k]=$(divide "${pair_bits[$k]}" "$dilation")
    pair_us[$k]=$(scale "${pair_us[$k]}" "$dilation")
  done
  log "time dilation D = $dilation: compute x $dilation, link rates / $dilation, latencies" \
      "x $dilation; emulated time = wall time / $dilation"
fi

# -- state and teardown ---------------------------------------------------------------------------
id=$$
bridge="at${id}b"
mode=loopback
namespaces=() endpoints=() ips=() node_pids=()
run_pid=""
run_is_command=0
cleaned=""
work="" log_dir=""

# True while `pid` runs (a zombie, exited but not yet reaped, does not count).
running() {
  local stat
  read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
  stat=${stat##*) }
  [[ ${stat%% *} != Z ]]
}

# Sends `sig` to `pid` (to its process group too when `group` is 1), waits up to `grace` s.
stop_process() {
  local pid=$1 sig=$2 grace=$3 group=${4:-0} i
  running "$pid" || return 0
  if (( group )); then kill "-$sig" -- "-$pid" 2>/dev/null || true; fi
  kill "-$sig" "$pid" 2>/dev/null || true
  for (( i = 0; i < grace * 10; ++i )); do
    running "$pid" || return 0
    sleep 0.1
  done
  running "$pid" && return 1
  return 0
}

cleanup() {
  local status=$1 i pid left
  [[ -z $cleaned ]] || return 0
  cleaned=1
  trap '' INT TERM HUP
  set +e  # tear down as much as possible whatever fails
  # The job or command first (so that it does not start recovering from the nodes' exits):
  # SIGTERM (a background job of a script ignores SIGINT), SIGKILL after 5 s.
  if [[ -n $run_pid ]] && running "$run_pid"; then
    log "stopping the ${run_what:-job} (pid $run_pid)"
    stop_process "$run_pid" TERM 5 "$run_is_command" \
      || stop_process "$run_pid" KILL 2 "$run_is_command" || true
  fi
  # A command's other processes (its group) may outlive it.
  (( run_is_command )) && [[ -n $run_pid ]] && kill -KILL -- "-$run_pid" 2>/dev/null || true
  # The nodes: SIGTERM together, SIGKILL to those still up after 3 s.
  for pid in "${node_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for (( i = 0; i < 30; ++i )); do
    left=0
    for pid in "${node_pids[@]}"; do running "$pid" && left=1; done
    (( left )) || break
    sleep 0.1
  done
  for pid in "${node_pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${node_pids[@]}" ${run_pid:+"$run_pid"}; do wait "$pid" 2>/dev/null || true; done
  if [[ $mode == netns ]]; then
    remove_network "$id" || true
    left=$(leftovers "$id")
    [[ -z $left ]] || log "warning: left behind: $(tr '\n' ' ' <<<"$left")"
  fi
  # After a failure (not a signal), the end of every node log, since the folder goes away.
  if (( status != 0 && status < 128 )) && [[ -z $keep_logs && -n $log_dir ]]; then
    for (( i = 0; i < ${#names[@]}; ++i )); do
      [[ -s $log_dir/${names[i]}.log ]] || continue
      log "--- last lines of ${names[i]}'s log"
      tail -n 5 "$log_dir/${names[i]}.log" >&2 || true
    done
  fi
  [[ -z $work ]] || rm -rf "$work"
  log "torn down (exit status $status)"
}

on_signal() {
  local name=$1 number=$2
  log "got SIG$name: tearing down"
  cleanup $((128 + number))
  trap - EXIT
  exit $((128 + number))
}
trap 'cleanup $?' EXIT
trap 'on_signal INT 2' INT
trap 'on_signal TERM 15' TERM
trap 'on_signal HUP 1' HUP
work=$(mktemp -d "${TMPDIR:-/tmp}/asteroid-testbed-$id.XXXXXX")
log_dir=${keep_logs:-$work/logs}
mkdir -p "$log_dir" || die "cannot create the log folder $log_dir"
# Throw-away credentials (docs/security.md): node i is member node<i>, the job or command is
# member "job"; the nodes accept only TLS with them. They go with $work.
if (( tls )); then
  members=job
  for (( i = 0; i < n; ++i )); do members+=",node$i"; done
  keys_out=$("$exe" keys --out "$work/keys" --members "$members" --days 2 2>&1) \
    || die "cannot make the testbed's credentials: $keys_out"
  job_credentials=(--credentials "$work/keys/job")
else
  log "WARNING: --no-tls: the nodes run without credentials (no TLS, no authentication)"
  job_credentials=()
fi

# -- network --------------------------------------------------------------------------------------
# A /24 in 198.18.0.0/15 that no interface here uses.
pick_subnet() {
  local k a b used
  used=$(ip -4 -o addr show 2>/dev/null | awk '{print $4}')
  for (( k = 0; k < 512; ++k )); do
    a=$(( 18 + ((id + k) % 512) / 256 )); b=$(( (id + k) % 256 ))
    grep -q "^198\.$a\.$b\." <<<"$used" || { echo "198.$a.$b"; return 0; }
  done
  return 1
}

tc_checked() {
  local out
  out=$("$@" 2>&1) \
    || die "cannot shape links: '$*' failed: $out (run with --no-shape for unshaped links)"
}

# netem options for a delay in us and the loss, or nothing when neither applies.
netem_args() {
  local us=$1 with_loss=$2 args=()
  (( us > 0 )) && args+=(delay "${us}us")
  [[ $with_loss == 1 && $loss != 0 ]] && args+=(loss "${loss}%")
  (( ${#args[@]} )) && echo "${args[*]} limit 100000"
  return 0
}

hex() { printf '%x' "$1"; }

# HTB burst for a rate in bit/s: 1 ms at that rate plus one full frame, so that fast links are
# not held back by the timer resolution (HTB's default is a few frames).
burst() { echo $(( $1 / 8 / 1000 + 1514 )); }

# Uplink (namespace side, egress of the device): a parent at the uplink rate; class 1:100+j for
# each other device j (rate bandwidth[i][j], netem latency[i][j]), selected by destination IP;
# default class 1:2 (to the supervisor and anything else) at the uplink rate, mean latency.
# Downlink (bridge side, egress towards the device): a parent at the downlink rate; class 1:10
# for traffic from other devices (already delayed at their uplink), class 1:20 from the
# supervisor (mean latency), selected by source IP.
shape_device() {
  local i=$1 ns=$2 dev_ns=$3 dev_host=$4 j c q args
  local up=${up_bits[i]} down=${down_bits[i]}
  q=$(( up / 8 / 100 )); (( q < 1514 )) && q=1514; (( q > 60000 )) && q=60000
  tc_checked tc -n "$ns" qdisc add dev "$dev_ns" root handle 1: htb default 2
  tc_checked tc -n "$ns" class add dev "$dev_ns" parent 1: classid 1:1 htb \
    rate "${up}bit" ceil "${up}bit" burst "$(burst "$up")" cburst "$(burst "$up")" quantum "$q"
  tc_checked tc -n "$ns" class add dev "$dev_ns" parent 1:1 classid 1:2 htb \
    rate "${up}bit" ceil "${up}bit" burst "$(burst "$up")" cburst "$(burst "$up")" quantum "$q"
  args=$(netem_args "${sup_us[i]}" 1)
  [[ -z $args ]] || tc_checked tc -n "$ns" qdisc add dev "$dev_ns" parent 1:2 handle 2: netem $args
  for (( j = 0; j < n; ++j )); do
    (( j == i )) && continue
    c=$(hex $((0x100 + j)))
    tc_checked tc -n "$ns" class add dev "$dev_ns" parent 1:1 classid "1:$c" htb \
      rate "${pair_bits[$i,$j]}bit" ceil "${pair_bits[$i,$j]}bit" \
      burst "$(burst "${pair_bits[$i,$j]}")" cburst "$(burst "${pair_bits[$i,$j]}")" quantum "$q"
    args=$(netem_args "${pair_us[$i,$j]}" 1)
    [[ -z $args ]] || tc_checked tc -n "$ns" qdisc add dev "$dev_ns" parent "1:$c" handle "$c:" netem $args
    tc_checked tc -n "$ns" filter add dev "$dev_ns" parent 1: protocol ip prio 1 u32 \
      match ip dst "${ips[j]}/32" flowid "1:$c"
  done
  q=$(( down / 8 / 100 )); (( q < 1514 )) && q=1514; (( q > 60000 )) && q=60000
  tc_checked tc qdisc add dev "$dev_host" root handle 1: htb default 10
  tc_checked tc class add dev "$dev_host" parent 1: classid 1:1 htb \
    rate "${down}bit" ceil "${down}bit" burst "$(burst "$down")" cburst "$(burst "$down")" quantum "$q"
  tc_checked tc class add dev "$dev_host" parent 1:1 classid 1:10 htb \
    rate "${down}bit" ceil "${down}bit" burst "$(burst "$down")" cburst "$(burst "$down")" quantum "$q"
  tc_checked tc class add dev "$dev_host" parent 1:1 classid 1:20 htb \
    rate "${down}bit" ceil "${down}bit" burst "$(burst "$down")" cburst "$(burst "$down")" quantum "$q"
  args=$(netem_args "${sup_us[i]}" 1)
  [[ -z $args ]] || tc_checked tc qdisc add dev "$dev_host" parent 1:20 handle 20: netem $args
  tc_checked tc filter add dev "$dev_host" parent 1: protocol ip prio 1 u32 \
    match ip src "$subnet.1/32" flowid 1:20
}

if (( use_netns )); then
  if [[ $(id -u) -ne 0 ]]; then
    netns_problem="not running as root"
  elif ! command -v ip >/dev/null; then
    netns_problem="the ip program (iproute2) is missing"
  elif ! out=$(ip netns add "asteroid-$id-0" 2>&1); then
    netns_problem="'ip netns add' failed: $out"
  else
    mode=netns
  fi
else
  netns_problem="--no-netns"
fi

if [[ $mode == netns ]]; then
  subnet=$(pick_subnet) || die "no free /24 in 198.18.0.0/15"
  ip link add "$bridge" type bridge || die "cannot create bridge $bridge"
  ip addr add "$subnet.1/24" dev "$bridge"
  ip link set "$bridge" up
  # Latency and loss need the netem qdisc (CONFIG_NET_SCH_NETEM), which some kernels lack.
  wants_netem=0
  [[ $loss != 0 ]] && wants_netem=1
  for us in "${sup_us[@]}" "${pair_us[@]}"; do (( us > 0 )) && wants_netem=1; done
  if (( shape && wants_netem )); then
    if out=$(tc qdisc add dev "$bridge" root netem delay 1ms 2>&1); then
      tc qdisc del dev "$bridge" root 2>/dev/null || true
    elif [[ -n $delay_ms$loss_given ]]; then
      die "--delay-ms/--loss need the netem qdisc, which this kernel lacks ($out)"
    else
      log "WARNING: this kernel has no netem qdisc ($out): the cluster's latency_ms is NOT" \
          "emulated; link rates are"
      loss=0
      for k in "${!sup_us[@]}"; do sup_us[k]=0; done
      for k in "${!pair_us[@]}"; do pair_us[$k]=0; done
    fi
  fi
  for (( i = 0; i < n; ++i )); do
    ns="asteroid-$id-$i"
    (( i == 0 )) || ip netns add "$ns"
    namespaces+=("$ns")
    ips+=("$subnet.$((10 + i))")
    endpoints+=("$subnet.$((10 + i)):$((base_port + i))")
  done
  for (( i = 0; i < n; ++i )); do
    ns=${namespaces[i]} host_dev="at${id}h$i" ns_dev="at${id}n$i"
    ip link add "$host_dev" type veth peer name "$ns_dev"
    ip link set "$ns_dev" netns "$ns"
    ip link set "$host_dev" master "$bridge" up
    ip -n "$ns" addr add "${ips[i]}/24" dev "$ns_dev"
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "$ns_dev" up
    (( shape )) && shape_device "$i" "$ns" "$ns_dev" "$host_dev"
  done
  log "id $id: $n devices in network namespaces asteroid-$id-0..$((n - 1))," \
      "subnet $subnet.0/24, bridge $bridge ($subnet.1)"
  (( shape )) || log "WARNING: --no-shape: links are NOT shaped (full veth speed)"
else
  for (( i = 0; i < n; ++i )); do
    ips+=(127.0.0.1)
    endpoints+=("127.0.0.1:$((base_port + i))")
  done
  if (( use_netns )); then
    log "WARNING: network namespaces not available ($netns_problem):"
  else
    log "WARNING: network namespaces not used (--no-netns):"
  fi
  if (( shape )); then
    log "WARNING: falling back to $n loopback nodes on 127.0.0.1; links are NOT shaped by tc:" \
        "each node paces the tensors it sends (data plane, --link-rate) to its uplink rate;" \
        "control messages, delay and loss are not emulated; compute slowdown and memory" \
        "budgets still apply"
  else
    log "WARNING: falling back to $n loopback nodes on 127.0.0.1; links are NOT shaped" \
        "(no rate, delay or loss); compute slowdown and memory budgets still apply"
  fi
fi

# -- nodes ----------------------------------------------------------------------------------------
pdeath=()
setpriv --help 2>/dev/null | grep -q pdeathsig && pdeath=(setpriv --pdeathsig KILL)
printf '%-14s %-22s %-9s %-11s %-10s %-11s %s\n' device endpoint slowdown memory "up Mbit/s" \
  "down Mbit/s" "latency ms (to devices / supervisor)" >&2
for (( i = 0; i < n; ++i )); do
  lat="-"
  if [[ $mode == netns ]] && (( shape )); then
    lat=""
    for (( j = 0; j < n; ++j )); do
      (( j == i )) || lat+="$(awk -v u="${pair_us[$i,$j]}" 'BEGIN{printf "%g", u / 1000}'),"
    done
    lat="${lat%,} / $(awk -v u="${sup_us[i]}" 'BEGIN{printf "%g", u / 1000}')"
  fi
  if [[ $mode == netns ]] && (( shape )); then
    up=$(awk -v b="${up_bits[i]}" 'BEGIN{printf "%g", b / 1e6}')
    down=$(awk -v b="${down_bits[i]}" 'BEGIN{printf "%g", b / 1e6}')
  elif (( shape )); then
    up=$(awk -v b="${up_bits[i]}" 'BEGIN{printf "%g(paced)", b / 1e6}') down=-
  else
    up=- down=-
  fi
  printf '%-14s %-22s %-9s %-11s %-10s %-11s %s\n' "${names[i]}" "${endpoints[i]}" \
    "${slowdowns[i]}" "${memories[i]}" "$up" "$down" "$lat" >&2
  node_cmd=("$exe" node --listen "${endpoints[i]}" --name "${names[i]}" \
            --memory "${memories[i]}" --slowdown "${slowdowns[i]}" --threads "$threads")
  if (( tls )); then
    node_cmd+=(--credentials "$work/keys/node$i")
  elif [[ $mode == netns ]]; then
    node_cmd+=(--insecure) # the namespaces' addresses: reachable from this machine only
  fi
  if [[ $mode != netns ]] && (( shape )); then
    # No tc here: the node paces its own tensor traffic to its uplink.
    node_cmd+=(--link-rate "$(awk -v b="${up_bits[i]}" 'BEGIN{printf "%g", b / 1e6}')")
  fi
  if [[ $mode == netns ]]; then
    # The job's `cut` / `heal` faults take this veth end down and up.
    node_cmd+=(--link-interface "at${id}h$i")
    ip netns exec "${namespaces[i]}" "${pdeath[@]}" "${node_cmd[@]}" \
      >"$log_dir/${names[i]}.log" 2>&1 </dev/null &
  else
    "${pdeath[@]}" "${node_cmd[@]}" >"$log_dir/${names[i]}.log" 2>&1 </dev/null &
  fi
  node_pids+=($!)
done

for (( i = 0; i < n; ++i )); do
  deadline=$(( SECONDS + ready_timeout ))
  until grep -q "listening on" "$log_dir/${names[i]}.log" 2>/dev/null; do
    if ! running "${node_pids[i]}"; then
      die "node ${names[i]} exited before listening:" \
          "$(tail -n 3 "$log_dir/${names[i]}.log" | tr '\n' ' ')"
    fi
    (( SECONDS < deadline )) \
      || die "node ${names[i]} did not print 'listening on' within ${ready_timeout} s"
    sleep 0.1
  done
done
# Through the bridge: the supervisor's side to every node, and each node to the next one.
if [[ $mode == netns ]]; then
  for (( i = 0; i < n; ++i )); do
    timeout 5 bash -c "exec 3<>/dev/tcp/${ips[i]}/$((base_port + i))" 2>/dev/null \
      || die "cannot reach node ${names[i]} at ${endpoints[i]} from the root namespace"
    j=$(( (i + 1) % n ))
    (( n == 1 )) || ip netns exec "${namespaces[i]}" timeout 5 \
      bash -c "exec 3<>/dev/tcp/${ips[j]}/$((base_port + j))" 2>/dev/null \
      || die "node ${names[i]} cannot reach node ${names[j]} through bridge $bridge" \
             "(bridged traffic filtered? see /proc/sys/net/bridge/bridge-nf-call-iptables)"
  done
fi
log "$n nodes listening (logs in $log_dir): $(IFS=,; echo "${endpoints[*]}")"

# -- the job or the command -----------------------------------------------------------------------
nodes_csv=$(IFS=,; echo "${endpoints[*]}")
run_what=""
if [[ -n $job ]]; then
  jq --arg nodes "$nodes_csv" '.nodes = ($nodes | split(","))' "$job" >"$work/job.json" \
    || die "cannot read job file $job"
  run_what="job"
  log "running job $job on the testbed"
  "$exe" job --config "$work/job.json" "${job_credentials[@]}" &
  run_pid=$!
elif (( ${#command[@]} )); then
  export ASTEROID_NODES=$nodes_csv ASTEROID_TESTBED_ID=$id ASTEROID_TESTBED_MODE=$mode
  ASTEROID_CREDENTIALS=""
  (( ! tls )) || ASTEROID_CREDENTIALS=$work/keys/job
  export ASTEROID_CREDENTIALS
  export ASTEROID_TESTBED_NAMESPACES=$(IFS=,; echo "${namespaces[*]}")
  export ASTEROID_TESTBED_IPS=$(IFS=,; echo "${ips[*]}")
  export ASTEROID_TESTBED_NODE_PIDS=$(IFS=,; echo "${node_pids[*]}")
  export ASTEROID_TESTBED_LOG_DIR=$log_dir ASTEROID_TESTBED_DILATION=$dilation
  run_what="command"
  run_is_command=1
  log "running: ${command[*]}"
  setsid "${command[@]}" <&0 &
  run_pid=$!
else
  log "nodes up; Ctrl-C stops them"
fi

# Waits for the job/command, or (without one) until a node exits; reports nodes that die.
declare -A node_index=()
for (( i = 0; i < n; ++i )); do node_index[${node_pids[i]}]=$i; done
status=0
while :; do
  done_pid=""
  code=0
  wait -n -p done_pid || code=$?
  [[ -n $done_pid ]] || { status=$code; break; }
  if [[ $done_pid == "$run_pid" ]]; then
    status=$code
    log "$run_what finished with status $status"
    break
  fi
  i=${node_index[$done_pid]:-}
  [[ -n $i ]] || continue
  log "node ${names[i]} (pid $done_pid) exited with status $code"
  if [[ -z $run_pid ]]; then
    status=1
    log "a node exited: tearing the testbed down"
    break
  fi
done
exit "$status"
