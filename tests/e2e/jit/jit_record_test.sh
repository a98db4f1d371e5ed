#!/bin/bash
# pt-record's JIT capture (issue #7), on any host: `pt-record --sideband-only` runs jit_program,
# which writes ./jit-PID.dump (mapped PROT_EXEC as perf's marker) and /tmp/perf-PID.map. The
# archive must hold both files complete: `pt-archive extract` gives them back byte for byte,
# and `pt-archive info` names them with the program's pid. Run again as `jit_program torn` (its
# jitdump ends 24 bytes into a 77-byte record), the archive says so: metadata jit.torn.1.*.
# usage: jit_record_test.sh PT_RECORD PT_ARCHIVE JIT_PROGRAM
set -u
pt_record=$(readlink -f "$1") pt_archive=$(readlink -f "$2") program=$(readlink -f "$3")
tmp=$(mktemp -d)
perf_map=
torn_map=
trap 'rm -rf "$tmp"; [ -n "$perf_map" ] && rm -f "$perf_map"; [ -n "$torn_map" ] && rm -f "$torn_map"' EXIT
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
! grep -q "^  jit.torn" info.txt || fail "a whole jitdump is described as torn: $(grep jit.torn info.txt)"

mkdir torn && cd torn || fail "cannot enter $tmp/torn"
"$pt_record" --sideband-only -o torn.ptar -- "$program" torn > out.txt 2> err.txt \
  || fail "pt-record --sideband-only (torn) failed: $(cat err.txt)"
tdump=(jit-*.dump)
tpid=${tdump[0]#jit-}; tpid=${tpid%.dump}
torn_map=/tmp/perf-$tpid.map
addr=$(awk '$3 == "jit_mapped_only" { print $1 }' "$torn_map")
[ -n "$addr" ] || fail "$torn_map does not name jit_mapped_only"
"$pt_archive" info torn.ptar > info.txt || fail "pt-archive info (torn) failed: $(cat info.txt)"
printf '%s\n' "  jit.torn.1.pid = $tpid" "  jit.torn.1.jitdump = $tmp/torn/${tdump[0]}" \
  "  jit.torn.1.bytes_kept = 277" "  jit.torn.1.bytes_lost = 24" "  jit.torn.1.record_size = 77" \
  "  jit.torn.1.records_kept = 3" "  jit.torn.1.waited_ms = 200" \
  "  jit.torn.1.perf_map = $torn_map" "  jit.torn.1.code_count = 1" \
  "  jit.torn.1.code.1 = $addr 5 jit_mapped_only" > want.txt
grep '^  jit.torn' info.txt > got.txt
cmp -s want.txt got.txt || fail "jit.torn metadata differs: $(diff want.txt got.txt)"
echo "ok: jitdump and perf map captured complete (pid $pid); a torn one described (jit.torn.1.*)"
