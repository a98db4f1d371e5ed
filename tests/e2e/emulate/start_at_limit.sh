#!/bin/sh
# pt-emulate for real work (issue 27): --start-at resolves like --trigger, in any module and as
# libraries load (write is in libc, which is not mapped yet when gzip execs; gzip is stripped),
# or MODULE:SYMBOL; a --start-at that never resolves or never runs is said, not silent; and
# --max-instructions N traces exactly N instructions even while other threads are mid-step.
#   start_at_limit.sh PT_EMULATE EMULATE_VERIFY PT_DECODE SPINNERS
set -eu
emulate="$1"
verify="$2"
decode="$3"
spinners="$4"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
gzip=$(command -v gzip)
fail() { echo "FAIL: $*" >&2; exit 1; }

# Input large enough for a real compression, small enough that the traced tail stays short.
seq 1 3000 > "$dir/in"

# --start-at a libc function from a stripped program: the trace starts at write's entry.
for spec in write libc.so.6:write; do
  rm -f "$dir/w.ptar" "$dir/w.gt"
  "$emulate" --full --start-at "$spec" --ground-truth "$dir/w.gt" -o "$dir/w.ptar" \
    -- "$gzip" -c "$dir/in" > "$dir/out.gz" 2> "$dir/err" || { cat "$dir/err"; fail "$spec: exit"; }
  if grep -q warning "$dir/err"; then cat "$dir/err"; fail "$spec: warned"; fi
  gzip -dc "$dir/out.gz" | cmp - "$dir/in" || fail "$spec: gzip's output changed"
  test -s "$dir/w.gt" || fail "$spec: nothing traced"
  "$verify" "$dir/w.ptar" "$dir/w.gt" > /dev/null || fail "$spec: decode differs from ground truth"
  # The first traced instruction is write's first: the deepest slice open at the first time is
  # write (its callers in gzip are inferred from the stack, unnamed: gzip is stripped).
  "$decode" --format text -o "$dir/w.txt" "$dir/w.ptar" 2> /dev/null
  t0=$(grep -m1 -oE '^ *\[[0-9]+' "$dir/w.txt" | tr -d ' [')
  deepest=$(grep -E "^ *\[$t0 " "$dir/w.txt" | tail -n 1)
  case "$deepest" in
    *"] write (inferred)  "*write.c:*) ;;
    *) sed -n 1,12p "$dir/w.txt"; fail "$spec: the trace does not start in write: '$deepest'" ;;
  esac
done

# A symbol no module has: the capture completes (exit 0) and says nothing was traced, and why.
"$emulate" --full --start-at no_such_function_here -o "$dir/none.ptar" -- "$gzip" -c "$dir/in" \
  > /dev/null 2> "$dir/err" || { cat "$dir/err"; fail "missing symbol: exit"; }
grep -qx "pt-emulate: warning: nothing traced: --start-at no_such_function_here: not found in the target ($(readlink -f "$gzip"): no defined symbol 'no_such_function_here' (the file has no .symtab: it is stripped; use 0xADDR or an unstripped build))" "$dir/err" ||
  { cat "$dir/err"; fail "missing symbol: message"; }
grep -q "^pt-emulate: 0 instructions traced" "$dir/err" || { cat "$dir/err"; fail "missing symbol: count"; }
# A module that is mapped, without that symbol; a bad form is a usage error.
"$emulate" --full --start-at libc.so.6:no_such_function_here -o "$dir/none.ptar" \
  -- "$gzip" -c "$dir/in" > /dev/null 2> "$dir/err"
grep -q "^pt-emulate: warning: nothing traced: --start-at libc.so.6:no_such_function_here: not found in the target (/.*libc.so.6: no defined symbol 'no_such_function_here' (the file has no .symtab: it is stripped; use 0xADDR or an unstripped build))$" "$dir/err" ||
  { cat "$dir/err"; fail "missing symbol in a module: message"; }
status=0
"$emulate" --full --start-at :write -o "$dir/bad.ptar" -- "$gzip" -c "$dir/in" 2> "$dir/err" || status=$?
test "$status" -eq 2 || fail "bad --start-at: status $status"
grep -qx "pt-emulate: --start-at ':write': MODULE:SYMBOL needs both (libc.so.6:write)" "$dir/err" ||
  { cat "$dir/err"; fail "bad --start-at: message"; }
test ! -e "$dir/bad.ptar" || fail "bad --start-at: an archive was written"

# Exactly N instructions with four threads stepping at once, in the PT and the ground truth.
n=400000
"$emulate" --full --max-instructions $n --ground-truth "$dir/s.gt" -o "$dir/s.ptar" \
  -- "$spinners" 2> "$dir/err" || { cat "$dir/err"; fail "spinners: exit"; }
grep -q "^pt-emulate: $n instructions traced, 4 threads" "$dir/err" || { cat "$dir/err"; fail "spinners: summary"; }
test "$(wc -l < "$dir/s.gt")" -eq $n || fail "spinners: $(wc -l < "$dir/s.gt") ground-truth lines, not $n"
# Every thread was running near the end: the last 40000 instructions come from all four.
test "$(tail -n 40000 "$dir/s.gt" | cut -d' ' -f1 | sort -u | wc -l)" -eq 4 ||
  fail "spinners: not all four threads ran at the limit (the test proves nothing then)"
"$verify" "$dir/s.ptar" "$dir/s.gt" > /dev/null || fail "spinners: decode differs from ground truth"
echo ok
