#!/bin/bash
# pt-record's JIT capture (issue #7), on any host: `pt-record --sideband-only` runs jit_program,
# which writes ./jit-PID.dump (mapped PROT_EXEC as perf's marker) and /tmp/perf-PID.map. The
# archive must hold both files complete: `pt-archive extract` gives them back byte for byte,
# and `pt-archive info` names them with the program's pid.
# usage: jit_record_test.sh PT_RECORD PT_ARCHIVE JIT_PROGRAM
set -u
pt_record=$(readlink -f "$1") pt_archive=$(readlink -f "$2") program=$(readlink -f "$3")
tmp=$(mktemp -d)
perf_map=
trap 'rm -rf "$tmp"; [ -n "$perf_map" ] && rm -f "$perf_map"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cd "$tmp" || fail "cannot enter $tmp"
"$pt_record" --sideband-only -o cap.ptar -- "$program" > out.txt 2> err.txt \
  || fail "pt-record --sideband-only failed: $(cat err.txt)"
dumps=(jit-*.dump)
[ ${#dumps[@]} -eq 1 ] && [ -f "${dumps[0]}" ] || fail "expected one jit-PID.dump, found: ${dumps[*]}"
pid=${dumps[0]#jit-}; pid=${pid%.dump}
dump="$tmp/${dumps[0]}"
perf_map=/tmp/perf-$pid.map
[ -s "$perf_map" ] || fail "$perf_map was not written"
[ -s "$dump" ] || fail "$dump is empty"

"$pt_archive" info cap.ptar > info.txt || fail "pt-archive info failed: $(cat info.txt)"
grep -qxF "  jitdump \"$dump\": $(stat -c %s "$dump") bytes, pid $pid, vaddr 0x0, build id none" info.txt \
  || fail "no jitdump blob for $dump: $(grep -A9 '^blobs' info.txt)"
grep -qxF "  perf-map \"$perf_map\": $(stat -c %s "$perf_map") bytes, pid $pid, vaddr 0x0, build id none" info.txt \
  || fail "no perf-map blob for $perf_map: $(grep -A9 '^blobs' info.txt)"

"$pt_archive" extract cap.ptar blobs > /dev/null || fail "pt-archive extract failed"
check_blob() {  # kind original-path
  local file
  file=$(awk -F'\t' -v k="$1" -v n="$2" '$1 == k && $2 == n { print $5 }' blobs/manifest.tsv)
  [ -n "$file" ] || fail "manifest has no $1 blob named $2: $(cat blobs/manifest.tsv)"
  cmp -s "blobs/$file" "$2" || fail "the $1 blob differs from $2"
}
check_blob jitdump "$dump"
check_blob perf-map "$perf_map"
echo "ok: jitdump and perf map captured complete (pid $pid)"
