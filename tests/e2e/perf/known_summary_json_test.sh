#!/bin/sh
# pt-decode --summary --format json on the known loop (known_loop.cpp, make_known_archive): the
# whole document equals known_loop.summary.json, written by hand from the program:
#   19 instructions (known_loop.expected), one thread (pid = tid = 4243, "known_loop");
#   func (named f00: its first label, at the same address) called 3 times, 2 instructions each
#   (nop, ret): insns = self_insns = 6; _start, the trace's first frame, 1 call holding all 19
#   instructions, 13 of them its own; the exit syscall one [syscall] slice without instructions;
#   no timing packets, so every time is 0 and rows tie on time: ordered by calls, then name.
# known_summary_json_test.sh MAKE_KNOWN_ARCHIVE KNOWN_LOOP PT_DECODE GOLDEN
set -u
make_archive=$1 known_loop=$2 pt_decode=$3 golden=$4
tmp=$(mktemp -d /tmp/known-summary-json.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$make_archive" "$known_loop" "$tmp/known.ptar" || { echo "FAIL: make_known_archive"; exit 1; }
"$pt_decode" --summary --format json -o "$tmp/known.summary.json" "$tmp/known.ptar" 2>"$tmp/err" ||
  { echo "FAIL: pt-decode: $(cat "$tmp/err")"; exit 1; }
diff -u "$golden" "$tmp/known.summary.json" || { echo "FAIL: JSON summary differs"; exit 1; }
echo ok
