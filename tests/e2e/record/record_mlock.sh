#!/bin/bash
# Issue 23 defect 2, as a real run: an unprivileged user whose ulimit -l is 0 records with a
# trigger breakpoint. The per-user perf allowance (perf_event_mlock_kb × CPUs) is all there is;
# pt-record must size its rings to fit it (the sideband rings used to take all of it, and the
# breakpoint's ring failed with EPERM). --sideband-only so it runs without Intel PT; needs root to
# switch to the user nobody.
# usage: record_mlock.sh PT_RECORD ARCHIVE_DUMP TARGET LIBRARY
set -u
pt_record=$1 dump=$2 target=$3 library=$4
fail() { echo "FAIL: $*"; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "must run as root (to become an unprivileged user)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 777 "$tmp"
user=nobody
group=$(id -gn "$user")
( ulimit -l 0 && exec setpriv --reuid="$user" --regid="$group" --clear-groups \
    "$pt_record" --sideband-only --trigger main -o "$tmp/trig.ptar" -- "$target" "$library" ) \
  > "$tmp/out" 2> "$tmp/err" || fail "pt-record failed: $(cat "$tmp/err")"
"$dump" "$tmp/trig.ptar" > "$tmp/dump.txt" || fail "unreadable archive"
grep -qx "meta trigger.reason=trigger" "$tmp/dump.txt" || fail "trigger.reason: $(grep trigger.reason "$tmp/dump.txt")"
# --check says what the budget is, from both limits.
( ulimit -l 0 && exec setpriv --reuid="$user" --regid="$group" --clear-groups "$pt_record" --check ) \
  > "$tmp/check" 2>&1
grep -q "locked memory: this user may lock [0-9]* KiB (perf_event_mlock_kb) × [0-9]* CPUs\? + ulimit -l 0 KiB" "$tmp/check" \
  || fail "--check: $(grep 'locked memory' "$tmp/check")"
echo PASS
