#!/usr/bin/env bash
# expect.sh EXIT REGEX COMMAND [ARGS...]
# Runs COMMAND and passes only when it exits with EXIT and its output (stdout
# and stderr together, newlines included) matches the extended regular
# expression REGEX. CTest's PASS_REGULAR_EXPRESSION alone ignores the exit
# code, so a command that printed the right words and then crashed would pass.
set -uo pipefail
if [ $# -lt 3 ]; then
  echo "usage: expect.sh EXIT REGEX COMMAND [ARGS...]" >&2
  exit 2
fi
want_exit=$1
regex=$2
shift 2
out=$("$@" 2>&1)
got_exit=$?
printf '%s\n' "$out"
status=0
if [ "$got_exit" -ne "$want_exit" ]; then
  echo "expect.sh: exit code $got_exit, expected $want_exit: $*" >&2
  status=1
fi
if ! printf '%s\n' "$out" | grep -Ezq -- "$regex"; then
  echo "expect.sh: output does not match /$regex/: $*" >&2
  status=1
fi
exit $status
