#!/bin/sh
# pt-emulate end to end: trace /bin/true (dynamic loader, libc start-up, exit) in full and
# snapshot mode; the archive must read back complete and decode to exactly the ground truth.
set -eu
emulate="$1"
verify="$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$emulate" --full -o "$dir/full.ptar" --ground-truth "$dir/full.gt" -- /bin/true
test -s "$dir/full.gt"
"$verify" "$dir/full.ptar" "$dir/full.gt"
# A small snapshot ring: it starts at a PSB and decodes to the end of the ground truth.
"$emulate" --snapshot-size 8K --psb-period 1K -o "$dir/snap.ptar" --ground-truth "$dir/snap.gt" \
  -- /bin/true
"$verify" "$dir/snap.ptar" "$dir/snap.gt" --suffix
# Stopping early detaches cleanly; the trace ends exactly at the last traced instruction.
"$emulate" --full --max-instructions 3000 -o "$dir/max.ptar" --ground-truth "$dir/max.gt" -- /bin/true
test "$(wc -l < "$dir/max.gt")" -eq 3000
"$verify" "$dir/max.ptar" "$dir/max.gt"
# Errors: a missing program fails cleanly and leaves no archive behind.
if "$emulate" -o "$dir/missing.ptar" -- /nonexistent/program 2>"$dir/err"; then exit 1; fi
grep -q "cannot run /nonexistent/program" "$dir/err"
test ! -e "$dir/missing.ptar"
echo ok
