#!/bin/bash
# Issue 24: a disk that fails with EIO while ptscope writes to it. The disk is real to the tools:
# an ext2 file system on a loop device whose backing file is a sealable memfd; sealing it
# (F_SEAL_WRITE) makes every later write of the loop device fail, which the kernel reports to the
# file system as an I/O error (the VM has no device-mapper, so dmsetup's `error` target cannot be
# used). Mounted in a private mount namespace, two ways:
#  - `-o sync`: a write() itself returns EIO. pt-emulate and pt-synth write an archive, and the
#    disk fails once it holds 32 KiB of it; pt-record starts on a disk that already fails;
#  - default (write-back): write() succeeds into the page cache and EIO comes from fdatasync, the
#    way a failing disk usually shows. pt-emulate's archive, pt-decode's trace and text,
#    pt-archive export-perf, import-perf and extract, each on a disk that failed before they ran.
# Every tool: exit 1, one message naming the file and "Input/output error"; an archive keeps a
# readable prefix that does not claim to be complete (no End chunk, read from the page cache);
# every other output leaves what was at its path before untouched, and no temporary file.
# Needs root (losetup, mount, unshare); fails loudly without it or without the commands.
# usage: output_eio.sh PT_RECORD PT_EMULATE PT_SYNTH PT_DECODE PT_ARCHIVE ARCHIVE_DUMP LONG_RUNNING PROGRAM
set -u
fail() { echo "FAIL: $*"; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "must run as root (losetup, mount)"
for command in losetup mkfs.ext2 mount umount unshare python3; do
  command -v "$command" > /dev/null || fail "$command is missing (scripts/setup installs it)"
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Inputs for the converters, written on a good disk.
"$2" --full --start-at main -o "$tmp/c.ptar" -- "$8" > /dev/null 2>&1 || fail "pt-emulate of $8 failed"
"$5" export-perf "$tmp/c.ptar" -o "$tmp/c.data" 2> /dev/null || fail "export-perf of the capture failed"
# A listing of 1.2 M instructions is 24 MB: past the 8 MiB from which a replaced output is handed
# to writeback as it grows (sync_file_range), so the EIO of that early writeback must still
# surface, at the fdatasync before the rename.
"$3" -o "$tmp/big.ptar" --binary /bin/true --instructions 1200000 > /dev/null 2>&1 || fail "pt-synth failed"

cat > "$tmp/eio.sh" <<'INNER'
set -u
pt_record=$1 pt_emulate=$2 pt_synth=$3 pt_decode=$4 pt_archive=$5 dump=$6 long_running=$7 dir=$8
fail() { echo "FAIL: $*"; exit 1; }
eio="Input/output error (the device reported an I/O error: check the disk and the kernel log)"
mkdir -p "$dir/m"

# A 64 MiB ext2 file system on a loop device over a memfd, mounted with OPTIONS at $dir/m.
disk_up() {
  coproc DEVICE { python3 -u -c '
import fcntl, os, sys
fd = os.memfd_create("eio", os.MFD_ALLOW_SEALING)
os.ftruncate(fd, 64 << 20)
print(f"/proc/{os.getpid()}/fd/{fd}")
sys.stdin.readline()
fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE)  # every later write to it: EPERM
print("failing")
sys.stdin.readline()'; }
  read -r backing <&"${DEVICE[0]}" || fail "the memfd helper did not start"
  loop=$(losetup -f --show "$backing") || fail "losetup $backing failed"
  mkfs.ext2 -q -F -N 64 -m 0 "$loop" || fail "mkfs.ext2 $loop failed"
  mount -o "$1,errors=continue" "$loop" "$dir/m" || fail "cannot mount $loop"
}
disk_fails() {
  echo >&"${DEVICE[1]}"
  read -r reply <&"${DEVICE[0]}"
  [ "$reply" = failing ] || fail "could not seal the loop device's backing file"
}
disk_down() {
  umount "$dir/m" || fail "umount $dir/m"
  losetup -d "$loop"
  echo >&"${DEVICE[1]}"
  wait "$DEVICE_PID" 2>/dev/null
}
readable_incomplete() {  # ARCHIVE WHAT
  "$dump" "$1" > "$dir/dump.txt" 2>&1 || fail "$2: the archive does not read back: $(head -3 "$dir/dump.txt")"
  grep -qx "complete 0" "$dir/dump.txt" || fail "$2: the archive claims to be complete"
}
reported() {  # WHAT FILE_NAME: the message names the file and the I/O error
  grep -q "$2: .*$eio" "$dir/err" || fail "$1: no message naming $2 and EIO: $(head -3 "$dir/err")"
}
# Runs a writer in the background until its output reaches 32 KiB, then fails the disk.
fail_disk_midway() {  # OUTPUT COMMAND...
  local output=$1
  shift
  "$@" > /dev/null 2> "$dir/err" &
  local writer=$!
  while kill -0 "$writer" 2>/dev/null && [ "$(stat -c %s "$output" 2>/dev/null || echo 0)" -lt 32768 ]; do
    sleep 0.005
  done
  kill -0 "$writer" 2>/dev/null || fail "$1 ended before writing 32 KiB: $(head -3 "$dir/err")"
  disk_fails
  timeout 60 tail --pid="$writer" -f /dev/null || fail "$1 still runs 60 s after the disk failed"
  wait "$writer"
  code=$?
}

# 1. write() fails.
disk_up sync
# 5 M iterations: traced, hours (the disk fails after seconds); once pt-emulate has failed and
# let it go, well under a second, so no test leaves a program spinning (without a bound one did).
fail_disk_midway "$dir/m/e.ptar" "$pt_emulate" --full -o "$dir/m/e.ptar" -- "$long_running" 5000000
[ "$code" = 1 ] || fail "pt-emulate: exit $code after EIO, want 1: $(head -3 "$dir/err")"
reported pt-emulate e.ptar
readable_incomplete "$dir/m/e.ptar" pt-emulate
disk_down

disk_up sync
fail_disk_midway "$dir/m/s.ptar" "$pt_synth" -o "$dir/m/s.ptar" --binary /bin/true --instructions 200000000
[ "$code" = 1 ] || fail "pt-synth: exit $code after EIO, want 1: $(head -3 "$dir/err")"
reported pt-synth s.ptar
readable_incomplete "$dir/m/s.ptar" pt-synth
disk_down

disk_up sync
disk_fails
"$pt_record" --sideband-only -o "$dir/m/r.ptar" -- /bin/true > /dev/null 2> "$dir/err"
code=$?
[ "$code" = 1 ] || fail "pt-record: exit $code on a failing disk, want 1: $(head -3 "$dir/err")"
grep -q "r.ptar: .*Input/output error" "$dir/err" || fail "pt-record: no message naming r.ptar and EIO: $(head -3 "$dir/err")"
if [ -e "$dir/m/r.ptar" ]; then readable_incomplete "$dir/m/r.ptar" pt-record; fi
disk_down

# 2. Write-back: EIO at fdatasync.
disk_up defaults
disk_fails
"$pt_emulate" --full -o "$dir/m/w.ptar" -- /bin/true > /dev/null 2> "$dir/err"
code=$?
[ "$code" = 1 ] || fail "pt-emulate, write-back: exit $code, want 1 (a complete archive the disk never got?): $(head -3 "$dir/err")"
reported "pt-emulate, write-back" w.ptar
readable_incomplete "$dir/m/w.ptar" "pt-emulate, write-back"
# Converters: the path's old file stays, no temporary file is left.
cases=(
  "trace|t.pftrace|$pt_decode -o OUT $dir/c.ptar"
  "text|t.txt|$pt_decode --format text -o OUT $dir/c.ptar"
  "listing|l.txt|$pt_decode --format insns -o OUT $dir/big.ptar"
  "export-perf|p.data|$pt_archive export-perf $dir/c.ptar -o OUT"
  "import-perf|i.ptar|$pt_archive import-perf $dir/c.data -o OUT"
  "extract|manifest.tsv|$pt_archive extract $dir/c.ptar DIR"
)
for entry in "${cases[@]}"; do
  IFS='|' read -r name file command <<<"$entry"
  mkdir -p "$dir/m/$name"
  out=$dir/m/$name/$file
  echo old > "$out"  # in the page cache: readable after the disk fails
  command=${command//OUT/$out}
  command=${command//DIR/$dir/m/$name}
  $command > /dev/null 2> "$dir/err"
  code=$?
  [ "$code" = 1 ] || fail "$name: exit $code on a failing disk, want 1: $(head -3 "$dir/err")"
  # extract fails at the first file it writes (each is synced before its rename), which is named
  if [ "$name" = extract ]; then reported "$name" "$dir/m/$name/[^:]*"; else reported "$name" "$file"; fi
  [ "$(cat "$out")" = old ] || fail "$name: a failed write changed $out"
  leftovers=$(find "$dir/m/$name" -mindepth 1 ! -name "$file" -printf '%f ')
  [ -z "$leftovers" ] || fail "$name: files left beside $file: $leftovers"
  echo "$name: exit 1, $(grep -m1 -o "[^/ ]*: [a-z]* failed: [^(]*" "$dir/err")"
done
disk_down
echo PASS
INNER
unshare -m --propagation private bash "$tmp/eio.sh" "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$tmp" || exit 1
echo PASS
