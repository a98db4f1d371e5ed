#!/bin/bash
# pt-decode reads a .ptar's sideband chunks again where it uses them (it does not hold them:
# format::ReadOptions::keep_sideband_bytes). When the archive cannot be opened again by then (it
# was replaced, removed or made unreadable during the decode), the exit status must not say
# "complete": the notes name the sideband chunks, the status line says why, and with no
# sideband at all nothing decodes (exit 1).
# The failure is injected with strace into pt-decode's third open of the archive: the first two
# are the magic check (capture.h, IsPerfData) and ReadArchive, the third the sideband's read
# (SidebandTimeline::Build). Should that order change, the notes checked below are missing and
# the test fails rather than passing on another failure.
# The same capture as a perf.data (pt-archive export-perf) is read the same way (its sideband
# ranges read again from the file: format/PERF_DATA.md section 6), with the same three opens.
# When only one chunk differs on the third open, the rest of the sideband is used: exit 3.
# usage: sideband_unreadable_test.sh PT_SYNTH PT_DECODE CORPUS_STATIC PT_ARCHIVE
set -u
pt_synth=$1 pt_decode=$2 binary=$3 pt_archive=$4
fail() { echo "FAIL: $*"; exit 1; }
command -v strace > /dev/null || fail "strace is not installed (scripts/setup installs it)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# In the sanitizer tree (scripts/test --sanitize): LeakSanitizer cannot run under ptrace and
# fails the process at exit, so leak checking is off for the two decodes under strace. The same
# library path (the sideband gone before it is read again) is leak-checked without strace in
# decode-pipeline-damage. ASan and UBSan still check everything else; the last setting wins.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
capture=$tmp/percpu.ptar
"$pt_synth" -o "$capture" --binary "$binary" --instructions 3000000 --seed 2 --threads 3 \
  --cpus 2 --timeslice 500 > /dev/null 2>&1 || fail "pt-synth failed"

# check_unreadable FILE LABEL CHUNKS COUNTED: FILE decodes complete under strace without a fault
# (exit 0, opened at least 3 times); with its third open failing, exit 1, a note naming the
# sideband chunks CHUNKS ("0 to 6") and why, a note counting them (COUNTED: "7 sideband chunks")
# and the status line's reason. LABEL starts each failure.
check_unreadable() {
  local file=$1 label=$2 chunks=$3 counted=$4 status
  local out=$tmp/$(basename "$file")
  strace -f -P "$file" -e trace=openat -o "$out.opens" \
    "$pt_decode" -j1 "$file" -o "$out.whole.pftrace" 2> "$out.whole.err"
  status=$?
  [ $status -eq 0 ] || { cat "$out.whole.err"; fail "$label: exit $status without a fault, not 0"; }
  [ "$(grep -c 'openat(' "$out.opens")" -ge 3 ] || fail "$label: pt-decode opened it fewer than 3 times"
  # The third open fails: the sideband cannot be read again.
  strace -f -P "$file" -e trace=openat -e inject=openat:error=EACCES:when=3 -o /dev/null \
    "$pt_decode" -j1 "$file" -o "$out.gone.pftrace" 2> "$out.gone.err"
  status=$?
  cat "$out.gone.err"
  [ $status -eq 1 ] || fail "$label: exit $status with the sideband unreadable, not 1"
  grep -qF "note: sideband chunk 0 offset 0: cannot read the sideband again (chunks $chunks): $file: cannot open: Permission denied: skipped" "$out.gone.err" ||
    fail "$label: no note names the sideband chunks and why they could not be read"
  grep -qF "note: $counted of $file could not be read again" "$out.gone.err" ||
    fail "$label: no note counts the unread sideband chunks"
  grep -q "status: FAILED (exit 1): .*its sideband could not all be read again" "$out.gone.err" ||
    fail "$label: the status line does not give the unread sideband as a reason"
}

check_unreadable "$capture" .ptar "0 to 6" "7 sideband chunks"

# Partway: the third open gives a copy whose 4th Sideband chunk (type 4) has its first payload
# byte flipped, as if the file had been rewritten between ReadArchive and the sideband's read.
# strace does not make that open at all: it returns fd 9, which the shell opened on the copy
# and pt-decode inherits. Only that chunk is lost: exit 3 (written, partial), a note naming
# the chunk's file offset and its checksum, a note counting 1 chunk, and the status line's
# reason. (A perf.data has no checksums to find such a change by, so only the .ptar.)
damaged=$tmp/damaged.ptar
fourth=$(python3 - "$capture" "$damaged" <<'PY'
import struct, sys
data = bytearray(open(sys.argv[1], 'rb').read())
offset = struct.unpack_from('<H', data, 14)[0]  # FORMAT.md: header_size, the first chunk
sideband = []
while offset + 32 <= len(data):
    sync, kind, _, stored = struct.unpack_from('<IHHQ', data, offset)
    assert sync == 0x4B435450, f'no chunk at {offset:#x}'
    if kind == 4:
        sideband.append(offset)
    offset += 32 + (stored + 7) // 8 * 8
assert len(sideband) == 7, f'{len(sideband)} Sideband chunks, not 7'
data[sideband[3] + 32] ^= 0xFF
open(sys.argv[2], 'wb').write(data)
print(f'{sideband[3]:#x}')
PY
) || fail "could not make the damaged copy"
out=$tmp/partway
exec 9< "$damaged"
strace -f -P "$capture" -e trace=openat -e inject=openat:retval=9:when=3 -o /dev/null \
  "$pt_decode" -j1 "$capture" -o "$out.pftrace" 2> "$out.err"
status=$?
exec 9<&-
cat "$out.err"
[ $status -eq 3 ] || fail "partway: exit $status with one sideband chunk changed, not 3"
[ -s "$out.pftrace" ] || fail "partway: no trace written"
note="note: sideband chunk 3 offset 0: read again at file offset $fourth, $capture: chunk at"
grep -qF "$note offset $fourth: payload checksum mismatch" "$out.err" ||
  fail "partway: no note names the changed chunk's offset ($fourth) and its checksum"
grep -qF "note: 1 sideband chunk of $capture could not be read again" "$out.err" ||
  fail "partway: no note counts 1 unread sideband chunk"
grep -q "status: PARTIAL (exit 3): .*its sideband could not all be read again" "$out.err" ||
  fail "partway: the status line does not give the unread sideband as the reason"
# The perf.data: one range of sideband records (a chunk), read again by the third open.
data=$tmp/percpu.data
"$pt_archive" export-perf "$capture" -o "$data" 2> /dev/null || fail "export-perf failed"
check_unreadable "$data" perf.data "0 to 0" "1 sideband chunk"
echo "ok: .ptar and perf.data: complete without a fault; exit 1 with the notes and the reason" \
  "when the sideband cannot be read again; exit 3 when one chunk of it changed"
