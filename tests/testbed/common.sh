# Helpers for the testbed tests (sourced). Each test is `bash TEST.sh ASTEROID_EXE BASE_PORT`
# and uses ports BASE_PORT..BASE_PORT+9; exit 77 means skipped (no network namespaces here).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
testbed="$root/scripts/testbed.sh"
exe=${1:?usage: $0 ASTEROID_EXE BASE_PORT}
port=${2:?usage: $0 ASTEROID_EXE BASE_PORT}
[[ -x $exe ]] || { echo "FAIL: $exe is not an executable" >&2; exit 1; }
command -v jq >/dev/null || { echo "FAIL: jq is missing (scripts/setup.sh installs it)" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/testbed-test.XXXXXX")
tb_pid=""
trap 'tb_teardown' EXIT

say() { echo "[$(date +%T)] $*" >&2; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# On the way out: a testbed this test started and left running gets SIGTERM, and what it
# may have left is removed, so that a failing test leaves nothing behind either.
tb_teardown() {
  local status=$?
  if [[ -n $tb_pid ]] && kill -0 "$tb_pid" 2>/dev/null; then
    kill -TERM "$tb_pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$tb_pid" 2>/dev/null || break; sleep 0.1; done
  fi
  if [[ -n $tb_pid && $(id -u) -eq 0 ]]; then
    bash "$testbed" --cleanup "$tb_pid" >/dev/null 2>&1 || true
  fi
  # A failure's node logs go with the temp folder; their ends are what tells a slow node
  # from a lost one afterwards, so they go to stderr (the CI log) first.
  if (( status != 0 )); then
    local log
    for log in "$tmp"/logs/*.log; do
      [[ -f $log ]] || continue
      echo "--- the last 40 lines of $(basename "$log") ---" >&2
      tail -n 40 "$log" >&2
    done
  fi
  rm -rf "$tmp"
  return $status
}

# Skips the test (exit 77) unless this process may create network namespaces, veth pairs, a
# bridge and HTB qdiscs.
tb_require_netns() {
  local ns="asteroid-probe-$$" out
  if [[ $(id -u) -ne 0 ]]; then echo "SKIP: not root: no network namespaces" >&2; exit 77; fi
  command -v ip >/dev/null && command -v tc >/dev/null \
    || { echo "SKIP: ip/tc (iproute2) missing" >&2; exit 77; }
  if ! out=$(ip netns add "$ns" 2>&1); then
    echo "SKIP: 'ip netns add' failed: $out" >&2; exit 77
  fi
  if ! out=$( { ip -n "$ns" link add tbp0 type veth peer name tbp1 \
                && tc -n "$ns" qdisc add dev tbp0 root handle 1: htb default 1 \
                && tc -n "$ns" class add dev tbp0 parent 1: classid 1:1 htb rate 10mbit; } 2>&1 ); then
    ip netns del "$ns" 2>/dev/null || true
    echo "SKIP: veth or HTB not available: $out" >&2; exit 77
  fi
  ip netns del "$ns"
}

# Starts the testbed in the background with job control on, so that it gets its own process
# group and SIGINT is not ignored in it (as for a background job of a script). Output goes to
# $tmp/testbed.out; sets tb_pid (= the testbed's id).
tb_start() {
  set -m
  bash "$testbed" --exe "$exe" --base-port "$port" "$@" >"$tmp/testbed.out" 2>&1 &
  tb_pid=$!
  set +m
  say "testbed started: pid/id $tb_pid: $*"
}

# Waits for the testbed to exit (at most `timeout` s); sets tb_status.
tb_wait() {
  local timeout=${1:-200} i
  for (( i = 0; i < timeout * 10; ++i )); do
    kill -0 "$tb_pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$tb_pid" 2>/dev/null; then
    cat "$tmp/testbed.out" >&2
    fail "testbed still running after $timeout s"
  fi
  tb_status=0
  wait "$tb_pid" || tb_status=$?
  say "testbed exited with status $tb_status"
}

# Waits until `file` has `lines` lines matching `pattern` (at most `timeout` s); fails if the
# testbed exits first.
wait_for_lines() {
  local file=$1 pattern=$2 lines=$3 timeout=$4 i
  for (( i = 0; i < timeout * 10; ++i )); do
    if [[ -f $file ]] && (( $(grep -c -- "$pattern" "$file" || true) >= lines )); then return 0; fi
    if ! kill -0 "$tb_pid" 2>/dev/null; then
      cat "$tmp/testbed.out" >&2
      fail "testbed exited early"
    fi
    sleep 0.1
  done
  cat "$tmp/testbed.out" >&2
  fail "no $lines lines matching '$pattern' in $file after $timeout s"
}

# tb_start + tb_wait.
tb_run() {
  tb_start "$@"
  tb_wait 200
}

# Runs the job files $tmp/NAME.json for each NAME given, one after the other, on one testbed
# of cluster file $1 (their "nodes" replaced by the testbed's endpoints, connecting with its
# credentials); tb_run's status and output as for any command.
tb_run_jobs() {
  tb_start_jobs "$@"
  tb_wait 200
}

# tb_run_jobs in the background (tb_start): the test acts on the testbed meanwhile, then
# calls tb_wait.
tb_start_jobs() {
  local cluster=$1; shift
  cat >"$tmp/run-jobs.sh" <<SCRIPT
set -euo pipefail
nodes=\$(jq -nc --arg n "\$ASTEROID_NODES" '\$n | split(",")')
for j in $*; do
  jq --argjson n "\$nodes" '.nodes = \$n' "$tmp/\$j.json" >"$tmp/\$j.run.json"
  "$exe" job --config "$tmp/\$j.run.json" --credentials "\$ASTEROID_CREDENTIALS"
done
SCRIPT
  tb_start --cluster "$cluster" -- bash "$tmp/run-jobs.sh"
}

# Fails unless the metrics files $tmp/ref.jsonl and $tmp/cut.jsonl hold the same $1 steps with
# equal losses (relative 1e-4); says so with the last pair.
expect_equal_losses() {
  local steps=$1
  losses() { jq -r 'select(.event == "iteration") | "\(.step) \(.loss)"' "$1"; }
  awk 'NR == FNR { ref[$1] = $2; next } $1 in ref { print $1, ref[$1], $2 }' \
    <(losses "$tmp/ref.jsonl") <(losses "$tmp/cut.jsonl") >"$tmp/losses"
  (( $(wc -l <"$tmp/losses") == steps )) || fail "steps differ: $(cat "$tmp/losses")"
  awk '{d = $2 - $3; if (d < 0) d = -d; if (d > 1e-4 * ($2 < 0 ? -$2 : $2) + 1e-6) {
         print "step " $1 ": loss " $2 " fault-free, " $3 " with the cut"; bad = 1 } }
       END { exit bad }' "$tmp/losses" || fail "losses differ from the fault-free run"
  say "$steps losses equal to the fault-free run's (last: $(tail -n 1 "$tmp/losses"))"
}

# Fails unless the final checkpoints $tmp/ref.ckpt and $tmp/cut.ckpt hold the same step, weights
# and optimizer state (every value within 1e-4: `asteroid checkpoint compare`).
expect_equal_weights() {
  "$exe" checkpoint compare "$tmp/ref.ckpt" "$tmp/cut.ckpt" >"$tmp/compare.out" 2>&1 \
    || fail "final state differs from the fault-free run's: $(cat "$tmp/compare.out")"
  say "final state equal to the fault-free run's: $(tr '\n' ';' <"$tmp/compare.out")"
}

# The path tests (test_path_cut.sh, test_path_heal.sh): starts a fault-free job and the same job
# one after the other on cluster-3dev.json ($tmp/ref.json, $tmp/cut.json: the mlp for $1 steps,
# heartbeats of $hb_ms x $misses, a step timeout of 60 s so that a job that waited for it would
# fail, not recover; the planner, so that a node lost for its path can be re-planned with when
# the path answers again; drift re-plans off, so that the fault-free run keeps its plan), and
# returns once the second has done 6 steps.
path_test_start() {
  local steps=$1
  jq --arg m "$tmp/ref.jsonl" --arg c "$tmp/ref.ckpt" --argjson hb "$hb_ms" \
    --argjson n "$misses" --argjson s "$steps" \
    '.max_steps = $s | .epochs = 10 | .metrics = $m | .step_timeout_ms = 60000
     | .planner = "asteroid"
     | .fault_tolerance = {"heartbeat_ms": $hb, "heartbeat_misses": $n, "checkpoint": $c,
                           "drift_factor": 0}' \
    "$here/job-mlp.json" >"$tmp/ref.json"
  jq --arg m "$tmp/cut.jsonl" --arg c "$tmp/cut.ckpt" \
    '.metrics = $m | .fault_tolerance.checkpoint = $c' "$tmp/ref.json" >"$tmp/cut.json"
  tb_start_jobs "$here/cluster-3dev.json" ref cut
  wait_for_lines "$tmp/cut.jsonl" '"iteration"' 6 200
}

# Replaces the qdisc of node 1's HTB class towards node 2 (testbed.sh: 1:<hex 0x100 + 2>) with
# the arguments: `pfifo limit 0` drops every packet (silent, no reset), `pfifo limit 1000` heals.
path_1_to_2_qdisc() {
  tc -n "asteroid-$tb_pid-1" qdisc replace dev "at${tb_pid}n1" parent 1:102 handle 102: "$@"
}

# tb_start, then waits for `lines` iterations in the metrics file `file`.
tb_start_job() {
  local file=$1 lines=$2
  shift 2
  rm -f "$file"
  tb_start "$@"
  wait_for_lines "$file" '"iteration"' "$lines" 150
}

# The pids of the processes in device i's namespace.
ns_pids() { ip netns pids "asteroid-$tb_pid-$1" 2>/dev/null || true; }

# Fails unless nothing of testbed `id` remains: namespaces, links (bridge, veths), qdiscs on
# them, node processes on this test's ports, the job, the testbed's temp folder.
assert_clean() {
  local id=$1 left
  left=$( {
    ip netns list 2>/dev/null | grep -E "^asteroid-$id-" | sed 's/^/namespace: /'
    ip -o link show 2>/dev/null | grep -E ": at$id[bhn]" | sed 's/^/link: /'
    tc qdisc show 2>/dev/null | grep -E "dev at$id[bhn]" | sed 's/^/qdisc: /'
    pgrep -af "asteroid node --listen [^ ]*:($port|$((port + 1))|$((port + 2))|$((port + 3)))( |\$)" \
      | sed 's/^/node process: /'
    pgrep -af "asteroid-testbed-$id\\." | sed 's/^/process: /'
    ls -d "${TMPDIR:-/tmp}/asteroid-testbed-$id".* 2>/dev/null | sed 's/^/temp folder: /'
  } || true )
  if [[ -n $left ]]; then
    cat "$tmp/testbed.out" >&2 || true
    fail "testbed $id left behind:"$'\n'"$left"
  fi
  say "clean: no namespace, link, qdisc, process or temp folder of testbed $id"
}

# Fails (showing the testbed's output) unless it exited with `status`.
expect_status() {
  (( tb_status == $1 )) || { cat "$tmp/testbed.out" >&2; fail "$2: exit status $tb_status, expected $1"; }
}

# Fails unless the testbed's output says that both jobs of tb_run_jobs ran $1 steps.
expect_two_jobs_of() {
  (( $(grep -c "job done: $1 steps" "$tmp/testbed.out") == 2 )) \
    || fail "expected two jobs of $1 steps: $(grep "job done" "$tmp/testbed.out")"
}

expect_output() {
  grep -qE -- "$1" "$tmp/testbed.out" || { cat "$tmp/testbed.out" >&2; fail "testbed output lacks /$1/"; }
}
