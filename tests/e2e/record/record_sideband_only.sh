#!/bin/bash
# pt-record on this host (no Intel PT): --check and a recording attempt refuse with the exact
# reason; --sideband-only records a program that dlopens a library, and the archive lists that
# library, libc and the program with the build ids readelf reports, in a 0600 file.
# usage: record_sideband_only.sh PT_RECORD ARCHIVE_DUMP TARGET LIBRARY
set -u
pt_record=$1 dump=$2 target=$3 library=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
build_id() { readelf -n "$1" | sed -n 's/^ *Build ID: \([0-9a-f]*\)$/\1/p'; }

if [ -e /sys/bus/event_source/devices/intel_pt ]; then
  echo "this host has Intel PT: the refusal checks do not apply"
else
  "$pt_record" --check > "$tmp/check.txt"; status=$?
  [ $status -eq 2 ] || fail "--check exited $status, expected 2"
  grep -qxF "MISSING intel_pt PMU: /sys/bus/event_source/devices/intel_pt does not exist -- fix: the kernel has no Intel PT PMU (needs PT hardware and CONFIG_CPU_SUP_INTEL; in a VM, PT passthrough); use pt-emulate here instead (software, ~50,000 instructions/s: tens of thousands of times slower)" "$tmp/check.txt" \
    || fail "--check lacks the intel_pt PMU line: $(cat "$tmp/check.txt")"
  "$pt_record" -o "$tmp/refused.ptar" -- "$target" "$library" > /dev/null 2> "$tmp/refused.txt"; status=$?
  [ $status -eq 2 ] || fail "recording without PT exited $status, expected 2"
  grep -q "^pt-record: no Intel PT on this host: /sys/bus/event_source/devices/intel_pt does not exist (CPU: .*); use pt-emulate here instead (software, ~50,000 instructions/s: tens of thousands of times slower), or pt-record --sideband-only$" "$tmp/refused.txt" \
    || fail "refusal message: $(cat "$tmp/refused.txt")"
  [ ! -e "$tmp/refused.ptar" ] || fail "a refused recording wrote $tmp/refused.ptar"
fi

"$pt_record" --sideband-only -o "$tmp/cap.ptar" -- "$target" "$library" > "$tmp/out.txt" 2> "$tmp/err.txt" \
  || fail "--sideband-only failed: $(cat "$tmp/err.txt")"
grep -qx "answer 42" "$tmp/out.txt" || fail "the target did not run to completion"
"$dump" "$tmp/cap.ptar" > "$tmp/dump.txt" || fail "cannot read the archive"
grep -qx "mode 600" "$tmp/dump.txt" || fail "archive mode: $(grep ^mode "$tmp/dump.txt")"
grep -qx "complete 1" "$tmp/dump.txt" || fail "archive has no End chunk"
grep -qx "meta capture.mode=sideband-only" "$tmp/dump.txt" || fail "capture.mode"
grep -qx "meta trigger.reason=exit" "$tmp/dump.txt" || fail "trigger.reason"
grep -qx "meta capture.emulated=0" "$tmp/dump.txt" || fail "capture.emulated"
grep -qx "pt_chunks 0" "$tmp/dump.txt" || fail "PT chunks in a sideband-only capture"
grep -q "^bad_record" "$tmp/dump.txt" && fail "malformed sideband: $(grep ^bad_record "$tmp/dump.txt")"

lib_real=$(readlink -f "$library")
target_real=$(readlink -f "$target")
libc=$(sed -n 's/^module \(\/[^ ]*\/libc\.so\.6\) .*/\1/p' "$tmp/dump.txt")
[ -n "$libc" ] || fail "no libc.so.6 module: $(grep ^module "$tmp/dump.txt")"
for file in "$lib_real" "$target_real" "$libc"; do
  expected=$(build_id "$file")
  [ -n "$expected" ] || fail "readelf shows no build id for $file"
  grep -qxF "module $file $expected" "$tmp/dump.txt" || fail "module $file $expected missing: $(grep ^module "$tmp/dump.txt")"
done
# The dlopened library came from the kernel's MMAP2 (it did not exist when recording started).
grep -qxF "mmap2 $lib_real $(build_id "$lib_real")" "$tmp/dump.txt" || fail "no MMAP2 with build id for $lib_real"
grep -q "^comm record_dlopen_t" "$tmp/dump.txt" || fail "no COMM for the target"
grep -q "^blob vdso vdso64 pid [0-9]* size [1-9]" "$tmp/dump.txt" || fail "no vdso blob"

# --trigger works without Intel PT too (hardware execute breakpoint): main is hit, the capture
# stops with reason trigger and the target still runs to completion.
"$pt_record" --sideband-only --trigger main -o "$tmp/trig.ptar" -- "$target" "$library" > "$tmp/trig.out" 2> "$tmp/trig.err" \
  || fail "--trigger main failed: $(cat "$tmp/trig.err")"
# pt-record returns once the capture is complete; the detached target finishes on its own.
for _ in $(seq 1 100); do grep -qx "answer 42" "$tmp/trig.out" && break; sleep 0.05; done
grep -qx "answer 42" "$tmp/trig.out" || fail "the triggered target did not run to completion"
"$dump" "$tmp/trig.ptar" > "$tmp/trig.txt" || fail "cannot read the trigger archive"
grep -qx "meta trigger.reason=trigger" "$tmp/trig.txt" || fail "trigger: $(grep trigger.reason "$tmp/trig.txt")"
main_addr=$(sed -n 's/^marker trigger value 0x\([0-9a-f]*\) .*/\1/p' "$tmp/trig.txt")
[ -n "$main_addr" ] || fail "no trigger marker with the address: $(grep ^marker "$tmp/trig.txt")"
# Unknown symbol: a one-line error, exit 1, and the program never ran.
"$pt_record" --sideband-only --trigger no_such_symbol_xyz -o "$tmp/bad.ptar" -- "$target" "$library" > "$tmp/bad.out" 2> "$tmp/bad.err"; status=$?
[ $status -eq 1 ] || fail "unknown trigger symbol exited $status"
grep -qx "pt-record: --trigger no_such_symbol_xyz: not found in the target ($target_real: no defined symbol 'no_such_symbol_xyz')" "$tmp/bad.err" \
  || fail "unknown trigger message: $(cat "$tmp/bad.err")"
[ ! -s "$tmp/bad.out" ] || fail "the target ran although setup failed"
[ ! -e "$tmp/bad.ptar" ] || fail "a failed setup left $tmp/bad.ptar behind"
echo "PASS"
