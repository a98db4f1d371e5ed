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
# Snapshot big enough for the whole run: same result, through the PSB-aligned ring.
"$emulate" --snapshot-size 64M -o "$dir/snap.ptar" --ground-truth "$dir/snap.gt" -- /bin/true
"$verify" "$dir/snap.ptar" "$dir/snap.gt"
# Errors: a missing program fails cleanly and leaves no archive behind.
if "$emulate" -o "$dir/missing.ptar" -- /nonexistent/program 2>"$dir/err"; then exit 1; fi
grep -q "cannot run /nonexistent/program" "$dir/err"
test ! -e "$dir/missing.ptar"
echo ok
