#!/bin/bash
# Every file ptscope writes that is not a recording (pt-decode's traces, instruction listings,
# summaries and module listings; pt-archive export-perf, import-perf and extract) is written beside its path and
# renamed over it only when whole (issue 24):
#  - a symbolic link at the path, dangling or not, is refused and never followed (its target is
#    neither created nor changed);
#  - a write that fails (ENOSPC on /dev/full, EFBIG under `ulimit -f`) is one line naming the path
#    and the cause, exit 1, and leaves whatever was at the path before untouched, and no
#    temporary file behind.
# usage: safe_output_test.sh PT_EMULATE PT_DECODE PT_ARCHIVE PROGRAM
set -u
emulate=$1 decode=$2 archive=$3 program=$4
tmp=$(mktemp -d /tmp/safe-output-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$emulate" --full --start-at main -o "$tmp/c.ptar" -- "$program" >/dev/null 2>&1 ||
  { echo "FAIL: pt-emulate could not record $program"; exit 1; }
"$archive" export-perf "$tmp/c.ptar" -o "$tmp/c.data" 2>/dev/null ||
  { echo "FAIL: export-perf of the capture failed"; exit 1; }

# Each case: a name, the output path's file name, then the command with OUT for the path.
cases=(
  "trace|t.pftrace|$decode -o OUT $tmp/c.ptar"
  "text|t.txt|$decode --format text -o OUT $tmp/c.ptar"
  "insns|i.txt|$decode --format insns -o OUT $tmp/c.ptar"
  "summary|s.summary.txt|$decode -o OUT $tmp/c.ptar"
  "modules|m.json|$decode --list-modules -o OUT $tmp/c.ptar"
  "export-perf|p.data|$archive export-perf $tmp/c.ptar -o OUT"
  "import-perf|i.ptar|$archive import-perf $tmp/c.data -o OUT"
  "extract|manifest.tsv|$archive extract $tmp/c.ptar DIR"
)

# run NAME COMMAND_WITH_OUT PATH [ULIMIT_KIB]: exit status in $code, stderr in $tmp/err.
run() {
  local command=${2//OUT/$3}
  command=${command//DIR/$(dirname "$3")}
  if [ -n "${4:-}" ]; then
    (trap '' XFSZ; ulimit -f "$4"; exec $command) >/dev/null 2>"$tmp/err"
  else
    $command >/dev/null 2>"$tmp/err"
  fi
  code=$?
}

leftovers() {  # temporary files a failed write left in DIR
  find "$1" -maxdepth 1 -name '.*' ! -name . -printf '%f\n'
}

for entry in "${cases[@]}"; do
  IFS='|' read -r name file command <<<"$entry"
  dir=$tmp/$name
  mkdir -p "$dir"
  out=$dir/$file

  # A dangling link: its target must not be created.
  ln -s "$tmp/$name-target" "$out"
  run "$name" "$command" "$out"
  [ "$code" = 1 ] || fail "$name: dangling link: exit $code, want 1: $(cat "$tmp/err")"
  grep -q "$out: is a symbolic link; ptscope never writes through one" "$tmp/err" ||
    fail "$name: dangling link: no message naming it: $(cat "$tmp/err")"
  [ -e "$tmp/$name-target" ] && fail "$name: the dangling link's target was created"
  [ -L "$out" ] || fail "$name: the link was replaced"
  rm -f "$out"

  # A link to a file: the file keeps its bytes.
  echo precious >"$tmp/$name-file"
  ln -s "$tmp/$name-file" "$out"
  run "$name" "$command" "$out"
  [ "$code" = 1 ] || fail "$name: link to a file: exit $code, want 1"
  [ "$(cat "$tmp/$name-file")" = precious ] || fail "$name: wrote through the link"
  rm -f "$out"

  # The write fails half-way (EFBIG past 1 KiB): the old file stays, nothing else is left.
  echo old >"$out"
  run "$name" "$command" "$out" 1
  [ "$code" = 1 ] || fail "$name: write past ulimit -f: exit $code, want 1: $(cat "$tmp/err")"
  grep -q "File too large" "$tmp/err" || fail "$name: EFBIG not reported: $(cat "$tmp/err")"
  [ "$(cat "$out")" = old ] || fail "$name: a failed write changed $out"
  [ -z "$(leftovers "$dir")" ] || fail "$name: temporary files left: $(leftovers "$dir")"

  # And whole: the output replaces the old file (exit 0, or 3 for a perf.data without its vdso).
  run "$name" "$command" "$out"
  [ "$code" = 0 ] || [ "$code" = 3 ] || fail "$name: exit $code: $(cat "$tmp/err")"
  [ "$(cat "$out")" != old ] && [ -s "$out" ] || fail "$name: the output did not replace $out"
  [ -z "$(leftovers "$dir")" ] || fail "$name: temporary files left: $(leftovers "$dir")"
done

# A full disk: /dev/full is written directly (a device is never replaced) and reports ENOSPC.
for entry in "${cases[@]:0:5}"; do
  IFS='|' read -r name file command <<<"$entry"
  run "$name" "$command" /dev/full
  [ "$code" = 1 ] || fail "$name: /dev/full: exit $code, want 1"
  grep -q "/dev/full: write failed: No space left on device (the file system is full" "$tmp/err" ||
    fail "$name: /dev/full: $(cat "$tmp/err")"
done

echo "$failures failures"
[ "$failures" = 0 ]
