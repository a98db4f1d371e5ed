#!/bin/sh
# pt-decode command-line tests (issue #8): --summary, --threads and --time-range parsing and
# their errors. pt_decode_test.sh GROUP PT_DECODE MAKE_ARCHIVE [PT_EMULATE PROGRAM]
# (selection: --threads and --time-range selecting nothing the capture holds, --output-dir)
set -u
group=$1 pt_decode=$2 make_archive=$3
tmp=$(mktemp -d /tmp/pt-decode-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect CODE STDERR_TEXT -- ARGS...: exact exit code and stderr (stdout must be empty).
expect() {
  want_code=$1 want_err=$2
  shift 3
  "$pt_decode" "$@" >"$tmp/out" 2>"$tmp/err"
  code=$?
  [ "$code" = "$want_code" ] || fail "pt-decode $*: exit $code, want $want_code"
  [ -s "$tmp/out" ] && fail "pt-decode $*: wrote to stdout: $(head -c 200 "$tmp/out")"
  printf '%s\n' "$want_err" >"$tmp/want_err"
  diff -u "$tmp/want_err" "$tmp/err" || fail "pt-decode $*: stderr differs"
}

time_hint='(times are relative to the capture start, with a unit: ns, us, ms or s, e.g. 2ms:5ms, 1.5s:, :500us)'
threads_hint='(expected comma-separated thread or process ids, e.g. 1234,1240)'

case $group in
bad-values)
  # Malformed values are refused before any input is read (exit 2), naming option and value.
  expect 2 "pt-decode: --time-range '5ms:2ms': the start must be before the end $time_hint" \
    -- --time-range 5ms:2ms in.ptar
  expect 2 "pt-decode: --time-range '2xs:': unknown unit 'xs' in '2xs' $time_hint" \
    -- --time-range 2xs: in.ptar
  expect 2 "pt-decode: --time-range ':100': '100' has no unit $time_hint" -- --time-range :100 in.ptar
  expect 2 "pt-decode: --time-range '2ms': expected START:END, one ':' (either side may be empty) $time_hint" \
    -- --time-range 2ms in.ptar
  expect 2 "pt-decode: --time-range '': expected START:END, one ':' (either side may be empty) $time_hint" \
    -- --time-range "" in.ptar
  expect 2 "pt-decode: --threads '1,,2': empty entry $threads_hint" -- --threads 1,,2 in.ptar
  expect 2 "pt-decode: --threads '0': '0' is out of range (1 to 4294967295) $threads_hint" \
    -- --threads 0 in.ptar
  expect 2 "pt-decode: --threads 'abc': 'abc' is not a decimal id $threads_hint" \
    -- --threads 1 --threads abc in.ptar
  expect 2 "pt-decode: --summary and --format text contradict each other; give one of them" \
    -- --summary --format text in.ptar
  # --jobs is capped (issue 24: -1 wrapped to 4294967295 threads, 100000 aborted).
  jobs_hint='expected a number of decoder threads from 1 to 256 (default: one per core)'
  for n in -1 0 100000 257 4294967297 2x ""; do
    expect 2 "pt-decode: --jobs '$n': $jobs_hint" -- --jobs "$n" in.ptar
  done
  for n in 0 1073741825 "" -5; do
    expect 2 "pt-decode: --unit-bytes '$n': expected 1 to 1073741824 bytes" -- --unit-bytes "$n" in.ptar
  done
  expect 2 "pt-decode: --format xml: expected perfetto, text, folded, insns, summary, summary-json or speedscope" \
    -- --format xml in.ptar
  expect 2 "pt-decode: --format json is the summary's encoding: add --summary" \
    -- --format json in.ptar
  expect 2 "pt-decode: --summary and --format insns contradict each other; give one of them" \
    -- --summary --format insns in.ptar
  expect 2 "pt-decode: --list-modules lists one input, 2 given" -- --list-modules a.ptar b.ptar
  expect 2 "pt-decode: --summary-json names one file but 2 inputs were given" \
    -- --summary-json s.json --output-dir out a.ptar b.ptar
  expect 2 "pt-decode: --summary-json: an instruction listing has no call slices to summarize; use it with perfetto, text, folded, speedscope or summary" \
    -- --summary-json s.json --format insns in.ptar
  ;;
good-values)
  # Well-formed values pass parsing: the sample archive (threads 100 and 101, no timestamps) is
  # decoded (not exit 2, no option error); what --threads and --time-range select is the
  # pipeline's business (ids it does not hold: the selection group).
  "$make_archive" sample "$tmp/s.ptar" || { echo "make_archive failed"; exit 1; }
  for args in "--summary" "--format summary" "--threads 100,2 --threads 3" \
      "--time-range 2ms:" "--time-range :500us" "--time-range 1.5us:0.25s" "--time-range :" \
      "--summary --format summary --threads 101 --time-range 0:1s" "--summary --format json" \
      "--format summary-json"; do
    # shellcheck disable=SC2086  # word splitting of $args is intended
    "$pt_decode" $args -o "$tmp/out.txt" "$tmp/s.ptar" >/dev/null 2>"$tmp/err"
    code=$?
    [ "$code" != 2 ] || fail "pt-decode $args: exit 2 (usage error): $(cat "$tmp/err")"
    if grep -q -e '^pt-decode: --' -e 'try --help' "$tmp/err"; then
      fail "pt-decode $args: option error: $(cat "$tmp/err")"
    fi
  done
  # --summary, --format summary and a .summary.txt path all write the summary table. The
  # sample's PT is not real trace: nothing decodes, so the exit status says failed (1).
  for args in "--summary -o $tmp/a.txt" "--format summary -o $tmp/b.txt" "-o $tmp/c.summary.txt"; do
    # shellcheck disable=SC2086
    "$pt_decode" $args "$tmp/s.ptar" >/dev/null 2>"$tmp/err"
    code=$?
    [ "$code" = 1 ] || fail "pt-decode $args: exit $code, want 1"
    grep -q '^  status: FAILED (exit 1): no instruction was decoded' "$tmp/err" ||
      fail "pt-decode $args: no failed status line: $(cat "$tmp/err")"
  done
  for out in a.txt b.txt c.summary.txt; do
    head -c 19 "$tmp/$out" | grep -qx 'pt-decode summary: ' || fail "$out is not a summary"
  done
  cmp -s "$tmp/a.txt" "$tmp/b.txt" && cmp -s "$tmp/a.txt" "$tmp/c.summary.txt" ||
    fail "--summary, --format summary and .summary.txt differ"
  "$pt_decode" --help >"$tmp/help" 2>&1 || fail "--help failed"
  # --version names the build by pt-decode's own ELF build id (what ptscope-fleet keys on).
  build_id=$(readelf -n "$pt_decode" | awk '/Build ID:/ {print $3}')
  [ -n "$build_id" ] || fail "readelf finds no build id in $pt_decode"
  "$pt_decode" --version >"$tmp/version" 2>&1 || fail "--version failed"
  grep -qx "pt-decode [0-9][0-9.]* (build id $build_id)" "$tmp/version" ||
    fail "--version: $(cat "$tmp/version"), want the build id $build_id"
  for option in --summary --threads --time-range --list-modules --version \
      "perfetto|text|folded|insns|summary|summary-json|" speedscope; do
    grep -q -- "$option" "$tmp/help" || fail "--help does not mention $option"
  done
  ;;
selection)
  # Errors that list what exists (issue #27): a capture of names_program, stopped after 3000
  # instructions; the ground truth gives its thread id and instruction count.
  pt_emulate=$4 program=$5
  "$pt_emulate" --full --max-instructions 3000 --ground-truth "$tmp/truth" \
    -o "$tmp/c.ptar" -- "$program" >/dev/null 2>"$tmp/rec" || { cat "$tmp/rec"; exit 1; }
  tid=$(head -1 "$tmp/truth" | cut -d' ' -f1)
  count=$(wc -l <"$tmp/truth" | tr -d ' ' | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta')
  name=$(basename "$program" | cut -c1-15)  # the kernel's comm
  expect 2 "pt-decode: $tmp/c.ptar: --threads 99999: no thread or process of the capture has that id; it holds 1 thread (tid, pid, names, instructions decoded):
  $tid \"$name\" in process $tid \"$name\": $count instructions" -- --threads 99999 -o "$tmp/x.txt" "$tmp/c.ptar"
  [ -e "$tmp/x.txt" ] && fail "--threads 99999 wrote an output"
  expect 2 "pt-decode: $tmp/c.ptar: --threads 7,99999: no thread or process of the capture has those ids; it holds 1 thread (tid, pid, names, instructions decoded):
  $tid \"$name\" in process $tid \"$name\": $count instructions" -- --threads 7,99999 -o "$tmp/x.txt" "$tmp/c.ptar"
  # The capture's span as a plain decode states it ("over SPAN").
  LC_ALL=C "$pt_decode" -o "$tmp/all.txt" "$tmp/c.ptar" 2>"$tmp/err" || fail "plain decode: exit $?"
  span=$(sed -n 's/.* instructions over \(.*\)$/\1/p' "$tmp/err")
  [ -n "$span" ] || fail "no span in: $(cat "$tmp/err")"
  expect 2 "pt-decode: $tmp/c.ptar: --time-range 5ms:6ms lies outside the capture, which spans 0 ns to $span (times are relative to its start)" \
    -- --time-range 5ms:6ms -o "$tmp/x.txt" "$tmp/c.ptar"
  [ -e "$tmp/x.txt" ] && fail "--time-range outside the capture left an output"
  expect 2 "pt-decode: $tmp/c.ptar: --time-range 1ms: lies outside the capture, which spans 0 ns to $span (times are relative to its start)" \
    -- --time-range 1ms: -o "$tmp/x.txt" "$tmp/c.ptar"
  # --output-dir is created (with its parents); a path under a file cannot be.
  "$pt_decode" --output-dir "$tmp/new/dir" "$tmp/c.ptar" >/dev/null 2>"$tmp/err" ||
    fail "--output-dir new/dir: exit $?: $(cat "$tmp/err")"
  [ -s "$tmp/new/dir/c.pftrace" ] || fail "--output-dir new/dir: no c.pftrace in it"
  : >"$tmp/file"
  expect 1 "pt-decode: --output-dir $tmp/file/dir: cannot create it: Not a directory" \
    -- --output-dir "$tmp/file/dir" "$tmp/c.ptar"
  # Batch mode (issue 24): the exit status is the worst input's (failed, then partial, then
  # complete), and the report ends with each input's status and why. end.ptar is c.ptar with
  # its End chunk's payload damaged (every PT chunk intact: partial); bad.ptar is no archive.
  cp "$tmp/c.ptar" "$tmp/end.ptar"
  size=$(stat -c %s "$tmp/end.ptar")
  printf '\125' | dd of="$tmp/end.ptar" bs=1 seek=$((size - 3)) conv=notrunc 2>/dev/null
  printf 'not an archive\n' >"$tmp/bad.ptar"
  damaged="the input is damaged (1 damaged range, listed above): what was intact is decoded, with a gap where PT was lost"
  batch() {  # CODE REPORT INPUTS...: exit status and the report's last lines
    want_code=$1 want_report=$2
    shift 2
    "$pt_decode" --output-dir "$tmp/batch" "$@" >"$tmp/out" 2>"$tmp/err"
    code=$?
    [ "$code" = "$want_code" ] || fail "batch $*: exit $code, want $want_code"
    printf '%s\n' "$want_report" >"$tmp/want_report"
    tail -n "$(wc -l <"$tmp/want_report")" "$tmp/err" | diff -u "$tmp/want_report" - ||
      fail "batch $*: the report differs"
  }
  pt_decode=$(realpath "$pt_decode")  # the inputs are named as given, relative to $tmp
  cd "$tmp" || exit 1
  cp c.ptar c2.ptar
  batch 0 "pt-decode: 2 inputs: 2 complete, 0 partial, 0 failed
  c.ptar: complete
  c2.ptar: complete" c.ptar c2.ptar
  batch 3 "pt-decode: 2 inputs: 1 complete, 1 partial, 0 failed
  c.ptar: complete
  end.ptar: partial (3): $damaged" c.ptar end.ptar
  batch 1 "pt-decode: 3 inputs: 1 complete, 1 partial, 1 failed
  end.ptar: partial (3): $damaged
  bad.ptar: failed (1): bad.ptar: not a ptscope archive (.ptar): bad magic at offset 0 (found 6e 6f 74 20 61 6e 20 61)
  c.ptar: complete" end.ptar bad.ptar c.ptar
  [ -s "$tmp/batch/c.pftrace" ] && [ -s "$tmp/batch/end.pftrace" ] ||
    fail "batch: the complete and the partial input were not both written"
  [ -e "$tmp/batch/bad.pftrace" ] && fail "batch: the failed input left an output"
  cd - >/dev/null || exit 1
  ;;
*)
  echo "unknown group $group"; exit 2 ;;
esac
[ "$failures" = 0 ] || exit 1
echo ok
