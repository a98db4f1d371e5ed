#!/bin/bash
# The target is never stopped or killed by pt-record: SIGTERM to pt-record ends the capture
# cleanly (complete archive, trigger.reason=signal) while the target keeps running, and so does
# SIGKILL (the archive is then incomplete but readable). --duration ends with reason duration.
# Runs with --sideband-only so it works on hosts without Intel PT.
# usage: record_signals.sh PT_RECORD ARCHIVE_DUMP
set -u
pt_record=$1 dump=$2
tmp=$(mktemp -d)
target_pid=
cleanup() { [ -n "$target_pid" ] && kill "$target_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Starts pt-record on a shell that writes its pid and then blocks on a fifo; waits (bounded)
# until the target runs, which means pt-record has finished its setup.
start() {
  local name=$1; shift
  rm -f "$tmp/pid" "$tmp/fifo"
  mkfifo "$tmp/fifo"
  "$pt_record" --sideband-only "$@" -o "$tmp/$name.ptar" -- /bin/sh -c "echo \$\$ > $tmp/pid.tmp && mv $tmp/pid.tmp $tmp/pid && read x < $tmp/fifo" \
    2> "$tmp/$name.err" &
  recorder=$!
  for _ in $(seq 1 200); do [ -s "$tmp/pid" ] && break; sleep 0.05; done
  [ -s "$tmp/pid" ] || fail "$name: the target never started: $(cat "$tmp/$name.err")"
  target_pid=$(cat "$tmp/pid")
}
finish_target() {
  kill -0 "$target_pid" 2>/dev/null || fail "$1: the target died with pt-record"
  echo done > "$tmp/fifo"
  target_pid=
}

start term
kill -TERM "$recorder"
wait "$recorder"; status=$?
[ $status -eq 0 ] || fail "term: pt-record exited $status: $(cat "$tmp/term.err")"
finish_target term
"$dump" "$tmp/term.ptar" > "$tmp/term.txt" || fail "term: unreadable archive"
grep -qx "complete 1" "$tmp/term.txt" || fail "term: archive incomplete"
grep -qx "meta trigger.reason=signal" "$tmp/term.txt" || fail "term: $(grep trigger.reason "$tmp/term.txt")"
grep -qx "mode 600" "$tmp/term.txt" || fail "term: archive mode"

start kill
kill -KILL "$recorder"
wait "$recorder" 2>/dev/null
finish_target kill
"$dump" "$tmp/kill.ptar" > "$tmp/kill.txt" || fail "kill: the archive of a killed recorder is unreadable"
grep -qx "complete 0" "$tmp/kill.txt" || fail "kill: archive claims to be complete"
grep -qx "meta tool=pt-record" "$tmp/kill.txt" || fail "kill: the first metadata chunk is missing"

start duration --duration 0.3
wait "$recorder"; status=$?
[ $status -eq 0 ] || fail "duration: pt-record exited $status: $(cat "$tmp/duration.err")"
finish_target duration
"$dump" "$tmp/duration.ptar" > "$tmp/duration.txt" || fail "duration: unreadable archive"
grep -qx "meta trigger.reason=duration" "$tmp/duration.txt" || fail "duration: $(grep trigger.reason "$tmp/duration.txt")"
echo "PASS"
