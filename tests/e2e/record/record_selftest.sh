#!/bin/bash
# pt-record --selftest on a host without Intel PT (this one: AMD, or a VM) must refuse at once,
# saying why, with pt-record's no-PT status (2), and write nothing. The self-test's PASS/FAIL logic
# is checked against the kernel model (tests/record/selftest_test.cpp).
# usage: record_selftest.sh PT_RECORD
set -u
pt_record=$(realpath "$1")
fail() { echo "FAIL: $*"; exit 1; }
if grep -qw intel_pt /proc/cpuinfo; then
  fail "this host has Intel PT: this test checks the refusal without it (run pt-record --selftest)"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
"$pt_record" --selftest > out 2> err
status=$?
[ "$status" -eq 2 ] || fail "exit status $status, expected 2; stderr: $(cat err)"
[ ! -s out ] || fail "stdout: $(cat out)"
[ "$(wc -l < err)" -eq 1 ] || fail "expected one line, got: $(cat err)"
grep -q "^pt-record: selftest cannot run: .*Intel PT" err || fail "stderr: $(cat err)"
[ "$(ls | grep -cv '^out$\|^err$')" -eq 0 ] || fail "wrote $(ls | grep -v '^out$\|^err$')"
# Another command together with --selftest is a usage error.
"$pt_record" --selftest -p 1 > /dev/null 2> err2 && fail "--selftest -p 1 accepted"
grep -q "records its own program" err2 || fail "--selftest -p: $(cat err2)"
echo "PASS ($(cat err))"
