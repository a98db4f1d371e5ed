#!/bin/bash
# Issue 23 defect 8, as real runs: attaching to a process whose threads come and go never fails
# on a thread that exited between listing and perf_event_open; a process with many threads gets
# the descriptors it needs (the soft RLIMIT_NOFILE is raised to the hard one, as perf does), and
# past the hard limit pt-record says what it needs. --sideband-only so it runs without Intel PT.
# usage: record_threads.sh PT_RECORD THREAD_CHURN ARCHIVE_DUMP
set -u
pt_record=$1 churn=$2 dump=$3
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
target=
cleanup() { [ -n "$target" ] && kill "$target" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
start() {
  "$churn" "$@" > "$tmp/ready" &
  target=$!
  for _ in $(seq 1 100); do grep -q ready "$tmp/ready" 2>/dev/null && return; sleep 0.02; done
  fail "the target did not start"
}

start churn
for i in $(seq 1 20); do
  "$pt_record" --sideband-only -p "$target" --duration 0.05 -o "$tmp/churn.ptar" 2> "$tmp/err" \
    || fail "attach $i to a thread-churning process failed: $(cat "$tmp/err")"
done
"$dump" "$tmp/churn.ptar" | grep -qx "complete 1" || fail "incomplete archive"
kill "$target"; wait "$target" 2>/dev/null; target=

start many 60
( ulimit -Sn 48 && exec "$pt_record" --sideband-only -p "$target" --duration 0.05 -o "$tmp/many.ptar" ) \
  2> "$tmp/err" || fail "60 threads with a soft ulimit -n of 48: $(cat "$tmp/err")"
"$dump" "$tmp/many.ptar" | grep -qx "complete 1" || fail "incomplete archive"
( ulimit -n 48 && exec "$pt_record" --sideband-only -p "$target" --duration 0.05 -o "$tmp/tight.ptar" ) \
  2> "$tmp/err" && fail "60 threads fitted a hard ulimit -n of 48"
grep -q "pt-record needs about [0-9]* descriptors for 61 threads on [0-9]* CPUs, and ulimit -n allows 48 (hard limit 48)" "$tmp/err" \
  || fail "descriptor message: $(cat "$tmp/err")"
echo PASS
