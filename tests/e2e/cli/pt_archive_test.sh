#!/bin/sh
# pt-archive command-line tests: pt_archive_test.sh GROUP PT_ARCHIVE MAKE_ARCHIVE
set -u
group=$1 pt_archive=$2 make_archive=$3
tmp=$(mktemp -d /tmp/pt-archive-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect CODE STDOUT_FILE_OR_- STDERR_TEXT -- ARGS...: exact exit code, stdout and stderr.
expect() {
  want_code=$1 want_out=$2 want_err=$3
  shift 4
  "$pt_archive" "$@" >"$tmp/out" 2>"$tmp/err"
  code=$?
  [ "$code" = "$want_code" ] || fail "pt-archive $*: exit $code, want $want_code"
  if [ "$want_out" != - ]; then
    diff -u "$want_out" "$tmp/out" || fail "pt-archive $*: stdout differs"
  fi
  printf '%s' "$want_err" >"$tmp/want_err"
  [ -n "$want_err" ] && echo >>"$tmp/want_err"
  diff -u "$tmp/want_err" "$tmp/err" || fail "pt-archive $*: stderr differs"
}

"$make_archive" sample "$tmp/s.ptar" || { echo "make_archive failed"; exit 1; }
size=$(stat -c %s "$tmp/s.ptar")

case $group in
info)
  cat >"$tmp/want" <<EOT
archive: $tmp/s.ptar
format: ptar 1.0 (needs reader version 1), 15 chunks
created: 2026-01-01T00:00:00.123456789Z
features: emulated, embedded-binaries
status: complete
metadata (4):
  tool = pt-emulate
  tool.version = 0.1.0
  capture.mode = full
  cpu.vendor = GenuineIntel
pt streams (2):
  stream 1: pid 100 tid 100 cpu -1: 1200 bytes in 2 pieces, 500 bytes lost
    piece 0: offset 0, 1000 bytes, tsc 0x1000, snapshot 0, lost before 0, flags -
    piece 1: offset 1500, 200 bytes, tsc 0x2000, snapshot 0, lost before 0, flags truncated
  stream 2: pid 100 tid 101 cpu -1: 100 bytes in 1 piece, 64 bytes lost
    piece 0: offset 0, 100 bytes, tsc 0x0, snapshot 1, lost before 64, flags overwritten|snapshot
sideband: 1 attr, 1 chunk, 11 records (LOST 1, COMM 3, EXIT 1, FORK 2, MMAP2 1, AUX 1, ITRACE_START 1, SWITCH 1)
  losses: 3 events lost (LOST), 1 truncated AUX records
processes (2):
  pid 100 "demo" (ppid 0, exec): threads 100 "demo", 101 "worker" (exited)
  pid 200 "child" (ppid 100, exec): threads 200 "child"
modules (2):
  /usr/bin/demo: build id 12345678, 8192 bytes, embedded
  /usr/lib/libc.so.6: build id unknown, 1048576 bytes, not embedded
blobs (3):
  vdso "vdso64": 4 bytes, pid 100, vaddr 0x7fff0000, build id none
  elf "/usr/bin/demo": 4 bytes, pid 0, vaddr 0x0, build id 12345678
  jitdump "../../etc/evil	name": 3 bytes, pid 100, vaddr 0x0, build id none
markers (2):
  capture-start: tsc 500, pid 100, tid 100, cpu -1, value 0x0, "start"
  trigger: tsc 900, pid 100, tid 101, cpu 0, value 0x401000, "main"
time sync: 1 chunk, 2 pairs
EOT
  expect 0 "$tmp/want" "" -- info "$tmp/s.ptar"
  # Keys written again later (pt-record writes time.* at the start and once known): each key
  # once, where it first appeared, with the value in force and what it was before.
  "$make_archive" rewritten "$tmp/r.ptar"
  "$pt_archive" info "$tmp/r.ptar" >"$tmp/out" 2>"$tmp/err" || fail "info on rewritten: exit $?"
  sed -n '/^metadata/,/^pt streams/p' "$tmp/out" >"$tmp/got"
  printf '%s\n' 'metadata (5):' '  tool = pt-emulate' '  tool.version = 0.1.0' \
    '  capture.mode = full' '  cpu.vendor = AuthenticAMD (earlier: GenuineIntel)' \
    '  trigger.reason = exit' 'pt streams (2):' >"$tmp/want_meta"
  diff -u "$tmp/want_meta" "$tmp/got" || fail "info: metadata keys written twice"
  # An archive whose writer never closed it: everything is there, status says incomplete.
  "$make_archive" incomplete "$tmp/i.ptar"
  "$pt_archive" info "$tmp/i.ptar" >"$tmp/out" 2>"$tmp/err"
  code=$?
  [ "$code" = 3 ] || fail "info on incomplete: exit $code, want 3"
  grep -qx "pt-archive: $tmp/i.ptar: no End chunk: the capture was cut off after its last intact chunk; the information above is that of the intact chunks" "$tmp/err" ||
    fail "info on incomplete: stderr $(cat "$tmp/err")"
  grep -qx 'status: incomplete (no End chunk: the capture was cut off)' "$tmp/out" ||
    fail "info on incomplete: no incomplete status"
  grep -qx 'format: ptar 1.0 (needs reader version 1), 14 chunks' "$tmp/out" ||
    fail "info on incomplete: wrong chunk count"
  ;;
verify)
  echo "$tmp/s.ptar: OK: 15 chunks intact, End chunk present, $size bytes" >"$tmp/want"
  expect 0 "$tmp/want" "" -- verify "$tmp/s.ptar"
  "$make_archive" incomplete "$tmp/i.ptar"
  isize=$(stat -c %s "$tmp/i.ptar")
  ihex=$(printf '0x%x' "$isize")
  cat >"$tmp/want" <<EOT
$tmp/i.ptar: INCOMPLETE: 14 chunks intact, no End chunk
  intact from the start: 14 chunks from offset 0x28 (Blob 3, Marker 2, Metadata 1, Module 2, PtData 3, Sideband 1, SidebandAttr 1, TimeSync 1)
  no End chunk at offset $ihex: the capture was cut off at a chunk boundary
EOT
  expect 3 "$tmp/want" "pt-archive: $tmp/i.ptar: the capture was cut off (no End chunk); the intact chunks listed above are usable (pt-decode decodes them)" \
    -- verify "$tmp/i.ptar"
  # Cut inside chunk 1's header: chunk 0 (80 bytes at 0x28) survives.
  head -c 130 "$tmp/s.ptar" >"$tmp/t.ptar"
  cat >"$tmp/want" <<EOT
$tmp/t.ptar: DAMAGED: 1 chunks intact, 1 damaged range (10 of 130 bytes lost), no End chunk
  intact from the start: 1 chunk from offset 0x28 (Marker 1)
  damaged [0x78, 0x82) (10 bytes): chunk 1 at offset 0x78: truncated chunk header (10 of 32 bytes; the writer was cut off)
    recovered after it: 0 chunks
EOT
  expect 3 "$tmp/want" \
    "pt-archive: $tmp/t.ptar: 1 damaged range (10 of 130 bytes lost); the intact chunks listed above are usable (pt-decode decodes them)" \
    -- verify "$tmp/t.ptar"
  # Cut inside chunk 0: nothing is usable.
  head -c 100 "$tmp/s.ptar" >"$tmp/t0.ptar"
  expect 1 - \
    "pt-archive: $tmp/t0.ptar: 1 damaged range (60 of 100 bytes lost); no chunk is intact" \
    -- verify "$tmp/t0.ptar"
  # Flip one byte of chunk 0's payload (the Marker): checksum values computed independently here.
  cp "$tmp/s.ptar" "$tmp/c.ptar"
  printf '\377' | dd of="$tmp/c.ptar" bs=1 seek=80 conv=notrunc 2>/dev/null
  crcs=$(python3 - "$tmp/s.ptar" "$tmp/c.ptar" <<'PY'
import sys
def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    return c ^ 0xFFFFFFFF
good, bad = open(sys.argv[1], 'rb').read(), open(sys.argv[2], 'rb').read()
stored = int.from_bytes(good[48:56], 'little')  # chunk 0's stored_size (FORMAT.md)
good, bad = good[72:72 + stored], bad[72:72 + stored]
print('(stored 0x%08x, computed 0x%08x)' % (crc32c(good), crc32c(bad)))
PY
)
  # Only the damaged chunk is lost: every chunk after it is recovered, End chunk included.
  cat >"$tmp/want" <<EOT
$tmp/c.ptar: DAMAGED: 14 chunks intact, 1 damaged range (80 of $size bytes lost), End chunk present
  intact from the start: 0 chunks
  damaged [0x28, 0x78) (80 bytes): chunk 0 at offset 0x28: payload checksum mismatch $crcs
    recovered after it: 14 chunks from offset 0x78 (Blob 3, End 1, Marker 1, Metadata 1, Module 2, PtData 3, Sideband 1, SidebandAttr 1, TimeSync 1)
EOT
  expect 3 "$tmp/want" \
    "pt-archive: $tmp/c.ptar: 1 damaged range (80 of $size bytes lost); the intact chunks listed above are usable (pt-decode decodes them)" \
    -- verify "$tmp/c.ptar"
  ;;
extract)
  expect 0 - "" -- extract "$tmp/s.ptar" "$tmp/out.d"
  printf 'kind\tname\tbuild_id\tsize\tfile\n' >"$tmp/want"
  printf 'vdso\tvdso64\t-\t4\t000-vdso-vdso64\n' >>"$tmp/want"
  printf 'elf\t/usr/bin/demo\t12345678\t4\t001-elf-demo\n' >>"$tmp/want"
  printf 'jitdump\t../../etc/evil\\tname\t-\t3\t002-jitdump-evil_name\n' >>"$tmp/want"
  diff -u "$tmp/want" "$tmp/out.d/manifest.tsv" || fail "manifest differs"
  [ "$(ls "$tmp/out.d" | sort | tr '\n' ' ')" = "000-vdso-vdso64 001-elf-demo 002-jitdump-evil_name manifest.tsv " ] ||
    fail "unexpected files in the output directory: $(ls "$tmp/out.d")"
  [ "$(od -An -tx1 "$tmp/out.d/000-vdso-vdso64" | tr -d ' \n')" = 01020304 ] || fail "vdso bytes"
  [ "$(cat "$tmp/out.d/001-elf-demo" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ] || fail "elf bytes"
  [ "$(cat "$tmp/out.d/002-jitdump-evil_name")" = jit ] || fail "jitdump bytes"
  [ ! -e "$tmp/etc" ] || fail "wrote outside the output directory"
  echo "$tmp/s.ptar: extracted 3 blobs to $tmp/out.d (manifest.tsv)" >"$tmp/want"
  expect 0 "$tmp/want" "" -- extract "$tmp/s.ptar" "$tmp/out.d"   # again, over the old files
  : >"$tmp/file"
  expect 1 - "pt-archive: $tmp/file: cannot create output directory: exists and is not a directory" \
    -- extract "$tmp/s.ptar" "$tmp/file"
  ;;
bad-input)
  expect 1 /dev/null "pt-archive: $tmp/missing.ptar: cannot open: No such file or directory" \
    -- info "$tmp/missing.ptar"
  expect 1 /dev/null "pt-archive: $tmp: is a directory, not an archive file" -- verify "$tmp"
  : >"$tmp/empty.ptar"
  expect 1 /dev/null "pt-archive: $tmp/empty.ptar: empty file (0 bytes), not an archive" \
    -- info "$tmp/empty.ptar"
  printf '\001\002\003\004\005\006\007\010\011\012\013' >"$tmp/random.ptar"
  expect 1 /dev/null \
    "pt-archive: $tmp/random.ptar: not a ptscope archive (.ptar): bad magic at offset 0 (found 01 02 03 04 05 06 07 08)" \
    -- verify "$tmp/random.ptar"
  # A perf.data (its 8-byte magic is all that is read): say what it is and what to run.
  printf 'PERFILE2\150\000\000\000\000\000\000\000' >"$tmp/perf.data"
  for command in verify info extract; do
    expect 1 /dev/null "pt-archive: $tmp/perf.data: a perf.data file (magic PERFILE2), not a ptscope archive (.ptar): pt-decode reads it as it is (pt-decode $tmp/perf.data); pt-archive import-perf $tmp/perf.data -o OUT.ptar converts it" \
      -- $command "$tmp/perf.data" $([ $command = extract ] && echo "$tmp/x")
  done
  head -c 20 "$tmp/s.ptar" >"$tmp/short.ptar"
  expect 1 /dev/null "pt-archive: $tmp/short.ptar: truncated file header: 20 of 40 bytes at offset 0" \
    -- info "$tmp/short.ptar"
  "$make_archive" newer "$tmp/newer.ptar"
  expect 1 /dev/null \
    "pt-archive: $tmp/newer.ptar: archive needs reader version 2, this is version 1: upgrade ptscope" \
    -- info "$tmp/newer.ptar"
  # A damaged archive: info prints what it recovered, then the damage as one line on stderr.
  head -c 130 "$tmp/s.ptar" >"$tmp/t.ptar"
  expect 3 - \
    "pt-archive: $tmp/t.ptar: damaged [0x78, 0x82): chunk 1 at offset 0x78: truncated chunk header (10 of 32 bytes; the writer was cut off); the information above is that of the intact chunks" \
    -- info "$tmp/t.ptar"
  grep -qx 'status: damaged (see the line below)' "$tmp/out" || fail "info: damaged status"
  expect 1 /dev/null "pt-archive: $tmp/empty.ptar/x.ptar: cannot open: Not a directory" \
    -- verify "$tmp/empty.ptar/x.ptar"
  if [ "$(id -u)" != 0 ]; then  # root reads mode-000 files anyway
    cp "$tmp/s.ptar" "$tmp/locked.ptar" && chmod 000 "$tmp/locked.ptar"
    expect 1 /dev/null "pt-archive: $tmp/locked.ptar: cannot open: Permission denied" \
      -- info "$tmp/locked.ptar"
  fi
  expect 2 /dev/null \
    "pt-archive: unknown command 'frobnicate' (commands: info, verify, extract, import-perf, export-perf, embed)" \
    -- frobnicate
  expect 2 /dev/null "pt-archive verify: missing argument FILE
usage: pt-archive verify FILE" -- verify
  expect 2 /dev/null "pt-archive extract: missing argument DIR
usage: pt-archive extract FILE DIR" -- extract "$tmp/s.ptar"
  expect 2 /dev/null "pt-archive info: too many positional options have been specified on the command line
usage: pt-archive info FILE [--pieces]" -- info a b
  ;;
*) echo "unknown group $group"; exit 2 ;;
esac
[ "$failures" = 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "ok: $group"
