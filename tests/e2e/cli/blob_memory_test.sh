#!/bin/bash
# An archive of large, well-compressed blobs (1.5 GiB of blob data in a 6 MiB file; issue 24:
# a 17 MB archive of such blobs took 2.4-4.4 GB and aborted) is read without holding its blobs:
# pt-archive info and verify, and pt-decode (which reads each jitdump blob once, one at a time),
# stay under 400 MB of peak memory (one 64 MiB blob and its compressed bytes at a time).
# usage: blob_memory_test.sh MAKE_ARCHIVE PT_ARCHIVE PT_DECODE
set -u
make_archive=$1 archive=$2 decode=$3
tmp=$(mktemp -d /tmp/blob-memory-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
limit_kib=$((400 * 1024))

"$make_archive" big-blobs "$tmp/big.ptar" || { echo "FAIL: make_archive big-blobs"; exit 1; }
size=$(stat -c %s "$tmp/big.ptar")
[ "$size" -lt $((8 << 20)) ] || fail "the archive is $size bytes: the blobs did not compress"

# peak NAME WANT_CODE COMMAND...: runs it under /usr/bin/time, checks exit code and peak RSS.
peak() {
  local name=$1 want=$2
  shift 2
  /usr/bin/time -f %M -o "$tmp/rss" "$@" >"$tmp/out" 2>"$tmp/err"
  local code=$? rss
  rss=$(tail -1 "$tmp/rss")
  echo "$name: exit $code, peak $rss KiB"
  [ "$code" = "$want" ] || fail "$name: exit $code, want $want: $(tail -3 "$tmp/err")"
  [ "$rss" -le "$limit_kib" ] || fail "$name: peak memory $rss KiB > $limit_kib KiB"
}

peak "pt-archive info" 0 "$archive" info "$tmp/big.ptar"
grep -q 'jitdump "/tmp/jit-19.dump": 67108864 bytes' "$tmp/out" || fail "info: blob sizes: $(grep jit-19 "$tmp/out")"
peak "pt-archive verify" 0 "$archive" verify "$tmp/big.ptar"
# The PT is not real trace (exit 1: nothing decoded), but every jitdump blob was looked at.
peak "pt-decode" 1 "$decode" --format text -o "$tmp/out.txt" "$tmp/big.ptar"
[ "$(grep -c 'jitdump not used: /tmp/jit-[0-9]*.dump: ' "$tmp/err")" = 20 ] ||
  fail "pt-decode did not read the 20 jitdump blobs: $(head -5 "$tmp/err")"

echo "$failures failures"
[ "$failures" = 0 ]
