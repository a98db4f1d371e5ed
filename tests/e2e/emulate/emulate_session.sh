#!/bin/sh
# pt-emulate through the shared recording session (issue 23).
# 1. Defect 5: with --multi-snapshot every snapshot of pt-emulate's ring holds the whole ring (each
#    decodes alone), so consecutive snapshots overlap; the same execution must be decoded once.
#    corpus-calls calls leaf_a three times (tests/programs/README.md): three snapshots, and the
#    decode has leaf_a 3 times, main and top once (6, 3 and 3 while overlaps were decoded again).
# 2. The session's --duration and --embed-binaries, which pt-emulate gained from pt-record: an
#    attached process, stopped after 0.3 s with reason "duration", every module embedded.
# usage: emulate_session.sh PT_EMULATE PT_DECODE PT_ARCHIVE CORPUS_CALLS
set -eu
emulate="$1"
decode="$2"
archive="$3"
program="$4"
dir=$(mktemp -d)
target=
trap '[ -z "$target" ] || kill "$target" 2>/dev/null; rm -rf "$dir"' EXIT
fail=0

"$emulate" --trigger leaf_a --multi-snapshot -o "$dir/ms.ptar" -- "$program" > /dev/null
"$decode" --format summary -o "$dir/summary.txt" "$dir/ms.ptar" 2> "$dir/decode.err"
calls_of() {
  # The "all threads" table: calls in the first column, the function and [module] last.
  awk -v f="$1" -v m="[$(basename "$program")]" '$7 == f && $8 == m { print $1; exit }' \
    "$dir/summary.txt"
}
for expect in "leaf_a 3" "top 1" "main 1" "middle_one 2" "middle_two 1"; do
  set -- $expect
  got=$(calls_of "$1")
  if [ "$got" != "$2" ]; then
    echo "FAIL: $1 decoded ${got:-0} times from three overlapping snapshots, expected $2"
    fail=1
  fi
done
[ "$fail" -eq 0 ] || cat "$dir/summary.txt" "$dir/decode.err"

sleep 30 &
target=$!
"$emulate" -p "$target" --duration 0.3 --embed-binaries -o "$dir/dur.ptar" 2> "$dir/dur.err" ||
  { echo "FAIL: pt-emulate --duration exited $?: $(cat "$dir/dur.err")"; exit 1; }
kill "$target"
target=
"$archive" info "$dir/dur.ptar" > "$dir/info.txt"
grep -q "^status: complete$" "$dir/info.txt" || { echo "FAIL: duration: archive not complete"; fail=1; }
grep -q "^  trigger.reason = duration$" "$dir/info.txt" ||
  { echo "FAIL: duration: $(grep trigger.reason "$dir/info.txt")"; fail=1; }
grep -q "^features: .*embedded-binaries" "$dir/info.txt" ||
  { echo "FAIL: --embed-binaries: $(grep ^features "$dir/info.txt")"; fail=1; }
modules=$(grep -c "^  /.*: build id .* bytes, " "$dir/info.txt" || true)
embedded=$(grep -c "^  /.*: build id .* bytes, embedded$" "$dir/info.txt" || true)
if [ "$modules" -eq 0 ] || [ "$modules" -ne "$embedded" ]; then
  echo "FAIL: --embed-binaries: $embedded of $modules modules embedded"
  fail=1
fi
[ "$fail" -eq 0 ] || exit 1
echo ok
