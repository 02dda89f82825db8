#!/usr/bin/env bash
# checkpoint_compare.sh ASTEROID FOLDER
# `asteroid checkpoint show / compare` on checkpoints of short training runs:
# two identical runs compare equal (exit 0), a run one step longer or with
# another learning rate differs (exit 1, saying how), a truncated file is an
# error naming it (exit 2), a NaN tolerance is refused, and no tolerance
# accepts another step.
set -uo pipefail
asteroid=$1
dir=$2
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
fail() { echo "checkpoint_compare: $*" >&2; exit 1; }
train() { # name steps lr
  "$asteroid" train --model mlp --dataset synthetic-images --max-steps "$2" --lr "$3" \
    --checkpoint "$1.ckpt" --checkpoint-every "$2" --no-eval >"$1.log" 2>&1 \
    || fail "training $1 failed: $(cat "$1.log")"
}
train a 5 0.01
train b 5 0.01
train longer 6 0.01
train faster 5 0.2
expect() { # exit regex args...
  local want=$1 regex=$2
  shift 2
  out=$("$asteroid" checkpoint "$@" 2>&1)
  got=$?
  printf '%s\n' "$out"
  (( got == want )) || fail "exit $got, expected $want: checkpoint $*"
  printf '%s\n' "$out" | grep -Ezq -- "$regex" || fail "output does not match /$regex/: checkpoint $*"
}
expect 0 "model +mlp.*step +5 \\(epoch 0, data position 320\\).*optimizer state +6 tensors.*weights +6 tensors.*optimizer +sgd" show a.ckpt
expect 0 "weights +max \\|difference\\| 0\\b.*same state at step 5" compare a.ckpt b.ckpt
expect 1 "differ: step 5 \\(epoch 0, position 320\\) against 6" compare a.ckpt longer.ckpt
expect 1 "differ: optimizer settings.*weights +max \\|difference\\| [0-9.e-]+ in .*differ: weights beyond the tolerance 0.0001" \
  compare a.ckpt faster.ckpt
head -c 100 a.ckpt >truncated.ckpt
expect 2 "checkpoint 'truncated.ckpt': truncated" compare a.ckpt truncated.ckpt
expect 105 "--tolerance.*Value nan" compare a.ckpt b.ckpt --tolerance nan
# A wide tolerance accepts values, never another step or other settings.
expect 1 "differ: step" compare a.ckpt longer.ckpt --tolerance 100
echo "checkpoint_compare: PASS"
