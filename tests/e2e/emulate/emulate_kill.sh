#!/bin/bash
# Issue 24: pt-emulate killed (SIGKILL: nothing it can catch) at many instants leaves an archive
# whose every complete chunk reads back and decodes up to the kill: what maps the code is always
# written before the PT that needs it, and PT, ground truth, time sync pairs and sideband are
# handed to the kernel as tracing goes. At each instant: the archive reads (a torn last chunk at
# most), libipt decodes every thread to the start of its ground truth, and once pt-emulate has
# run a while that start is not empty; pt-decode decodes it without a gap for missing code.
# usage: emulate_kill.sh PT_EMULATE EMULATE_VERIFY PT_DECODE LONG_RUNNING
set -u
emulate=$1 verify=$2 decode=$3 target=$4
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for delay in 0.15 0.3 0.45 0.6 0.8 1.0 1.3 1.6 2.0 2.5; do
  "$emulate" --full -o "$tmp/k.ptar" --ground-truth "$tmp/k.gt" -- "$target" 2> "$tmp/err" &
  emulator=$!
  sleep "$delay"
  kill -KILL "$emulator"
  wait "$emulator" 2>/dev/null
  pkill -KILL -P "$emulator" 2>/dev/null  # nothing: EXITKILL took the tracee with the tracer
  out=$("$verify" "$tmp/k.ptar" "$tmp/k.gt" --prefix 2>&1) || fail "killed after ${delay}s: $out"
  decoded=$(echo "$out" | sed -n 's/.*, \([0-9]*\) instructions, .*/\1/p')
  echo "killed after ${delay}s: $decoded instructions decode, as the ground truth says"
  if awk "BEGIN { exit !($delay >= 0.6) }" && [ "${decoded:-0}" -eq 0 ]; then
    fail "killed after ${delay}s: nothing decodes"
  fi
  if [ "${decoded:-0}" -gt 0 ]; then
    "$decode" --format text -o "$tmp/k.txt" "$tmp/k.ptar" 2> "$tmp/decode.err"
    grep -qi "not found\|not mapped\|no code" "$tmp/k.txt" "$tmp/decode.err" \
      && fail "killed after ${delay}s: pt-decode misses code: $(grep -i 'not found\|not mapped\|no code' "$tmp/k.txt" "$tmp/decode.err" | head -3)"
  fi
done
echo PASS
