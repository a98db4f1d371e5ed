#!/bin/bash
# pt-record must be a static executable of at most 3 MiB once stripped.
# usage: record_static_check.sh PT_RECORD
set -u
binary=$1
kind=$(file -b "$binary")
case "$kind" in
  *"statically linked"*) ;;
  *) echo "FAIL: $binary is not statically linked: $kind"; exit 1 ;;
esac
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
strip -o "$tmp" "$binary" || { echo "FAIL: strip failed"; exit 1; }
size=$(stat -c %s "$tmp")
limit=$((3 * 1024 * 1024))
echo "stripped size: $size bytes (limit $limit)"
[ "$size" -le "$limit" ] || { echo "FAIL: stripped size $size > $limit"; exit 1; }
echo "PASS"
