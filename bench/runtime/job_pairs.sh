#!/usr/bin/env bash
# Runs the README's 4-device job with two asteroid programs in turn (A, B, A, B, ...) and prints
# each run's samples/s, loss, accuracy and CPU, then both medians (samples/s and CPU user +
# system) and B / A: how docs/benchmarks.md compares the runtime with an older commit on one host
# whose speed drifts (alternating spreads the drift over both), or one program with two job files
# (--a-job, --b-job: how docs/runtime.md compares micro-batch report settings). With
# --threads-at S, one more run of each is read S seconds in: CPU seconds and voluntary context
# switches by thread name, over all five processes (/proc/PID/task/*), to see where a difference
# goes.
#
#   bench/runtime/job_pairs.sh --a OLD_EXE --a-dir OLD_CHECKOUT --b build/apps/asteroid \
#       --b-args --no-tls --rounds 5 [--order abba] [--threads-at 30] [--port 27000]
#
# --order abba runs B first in every second round (A B, B A, A B, ...), so that neither program
# always runs right after the other; the default, ab, runs A first in every round.
#
# Each program runs in its directory (--a-dir / --b-dir, default this checkout) with that
# directory's examples/jobs/fashion_cnn_4dev.json (or --job FILE for both, --a-job / --b-job
# FILE for one), so an old commit reads the job file it understands. Nothing else should run
# meanwhile; a run takes about a minute on the 2-core development machine.
set -euo pipefail

usage() {
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

here=$(cd "$(dirname "$0")/../.." && pwd)
declare -A exe=([a]='' [b]='') dir=([a]=$here [b]=$here) args=([a]='' [b]='') jobs=([a]='' [b]='')
rounds=4 threads_at=0 port=27000 job='' order=ab
while [[ $# -gt 0 ]]; do
  case $1 in
    --a|--b) exe[${1#--}]=$2; shift 2 ;;
    --a-dir|--b-dir) who=${1#--}; dir[${who%-dir}]=$2; shift 2 ;;
    --a-args|--b-args) who=${1#--}; args[${who%-args}]=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --threads-at) threads_at=$2; shift 2 ;;
    --order) order=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --job) job=$2; shift 2 ;;
    --a-job|--b-job) who=${1#--}; jobs[${who%-job}]=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "job_pairs: unknown argument $1" >&2; usage ;;
  esac
done
[[ -n ${exe[a]} && -n ${exe[b]} ]] || { echo "job_pairs: --a and --b are required" >&2; usage; }
for who in a b; do
  [[ -x ${exe[$who]} ]] || { echo "job_pairs: ${exe[$who]} is not an executable" >&2; exit 2; }
  exe[$who]=$(realpath "${exe[$who]}")
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "job_pairs: --rounds must be a positive count, got $rounds" >&2; exit 2; }
[[ $order == ab || $order == abba ]] || { echo "job_pairs: --order must be ab or abba, got $order" >&2; exit 2; }
[[ $threads_at =~ ^[0-9]+$ ]] || { echo "job_pairs: --threads-at must be seconds, got $threads_at" >&2; exit 2; }
if ! [[ $port =~ ^[0-9]+$ ]] || (( port < 1 || port > 65531 )); then
  echo "job_pairs: --port must be in [1, 65531], got $port" >&2
  exit 2
fi
[[ -z $job ]] || job=$(realpath "$job")
for who in a b; do
  [[ -z ${jobs[$who]} ]] && continue
  [[ -f ${jobs[$who]} ]] || { echo "job_pairs: --$who-job ${jobs[$who]} is not a file" >&2; exit 2; }
  jobs[$who]=$(realpath "${jobs[$who]}")
done

# The job's command line for program $1 (a or b), as an array in `cmd`.
command_of() {
  local file=${jobs[$1]:-${job:-${dir[$1]}/examples/jobs/fashion_cnn_4dev.json}}
  local -a extra
  read -r -a extra <<<"${args[$1]}"
  cmd=("${exe[$1]}" cluster --nodes 4 --base-port "$port" --slowdown "1,1,2,2"
       --memory "2GiB,2GiB,1GiB,1GiB" --job "$file" "${extra[@]}")
}

declare -a speeds_a speeds_b cpu_a cpu_b
for ((round = 1; round <= rounds; ++round)); do
  turn=(a b)
  [[ $order == abba ]] && (( round % 2 == 0 )) && turn=(b a)
  for who in "${turn[@]}"; do
    command_of "$who"
    out=$( cd "${dir[$who]}" && TIMEFORMAT="cpu %U %S" && { time "${cmd[@]}"; } 2>&1 ) \
      || { echo "job_pairs: round $round, program $who failed:" >&2; echo "$out" | tail -5 >&2; exit 1; }
    done_line=$(grep -o 'job done: .*' <<<"$out" | head -1)
    sps=$(grep -o '[0-9.]* samples/s' <<<"$done_line" | head -1 | cut -d' ' -f1)
    read -r _ user sys < <(grep '^cpu ' <<<"$out" | tail -1)
    [[ -n $sps ]] || { echo "job_pairs: round $round, program $who printed no 'job done'" >&2; exit 1; }
    cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN {printf "%.1f", u + s}')
    if [[ $who == a ]]; then speeds_a+=("$sps") cpu_a+=("$cpu"); else speeds_b+=("$sps") cpu_b+=("$cpu"); fi
    echo "round $round $who $(date -u +%H:%M:%S) $done_line | cpu ${user}+${sys} s"
  done
done

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
ma=$(median "${speeds_a[@]}") mb=$(median "${speeds_b[@]}")
awk -v a="$ma" -v b="$mb" 'BEGIN {printf "medians: a %.1f, b %.1f samples/s, b / a %.3f\n", a, b, b / a}'
ca=$(median "${cpu_a[@]}") cb=$(median "${cpu_b[@]}")
awk -v a="$ca" -v b="$cb" 'BEGIN {printf "CPU (user + system) medians: a %.1f, b %.1f s, b / a %.3f\n", a, b, b / a}'
declare -a pair_ratios
for ((i = 0; i < rounds; ++i)); do
  pair_ratios+=("$(awk -v a="${speeds_a[i]}" -v b="${speeds_b[i]}" 'BEGIN {printf "%.4f", b / a}')")
  awk -v r=$((i + 1)) -v q="${pair_ratios[i]}" 'BEGIN {printf "pair %d: b / a %.3f\n", r, q}'
done
faster=$(printf '%s\n' "${pair_ratios[@]}" | awk '$1 > 1 {n++} END {print n + 0}')
awk -v m="$(median "${pair_ratios[@]}")" -v f="$faster" -v n="$rounds" \
  'BEGIN {printf "median pair ratio b / a %.3f; b faster in %d of %d pairs\n", m, f, n}'

(( threads_at > 0 )) || exit 0
for who in a b; do
  command_of "$who"
  ( cd "${dir[$who]}" && exec "${cmd[@]}" ) >/dev/null 2>&1 &
  main=$!
  sleep "$threads_at"
  echo "threads of $who, ${threads_at} s in (CPU s, voluntary switches, threads):"
  for p in $main $(pgrep -P "$main" || true); do
    kind=node; [[ $p == "$main" ]] && kind=primary
    for t in /proc/"$p"/task/*; do
      [[ -r $t/stat ]] || continue
      name=$(<"$t"/comm)
      cpu=$(awk '{print $14 + $15}' "$t"/stat)
      vol=$(awk '/^voluntary_ctxt_switches/ {print $2}' "$t"/status)
      echo "$kind $name $cpu $vol"
    done
  done | awk -v hz="$(getconf CLK_TCK)" \
    '{k = $1 " " $2; c[k] += $3; v[k] += $4; n[k]++}
     END {for (k in c) printf "  %-28s %7.2f s %8d switches %3d threads\n", k, c[k] / hz, v[k], n[k]}' | sort
  kill -INT "$main" 2>/dev/null || true
  wait "$main" 2>/dev/null || true
done
