#!/bin/bash
# pt-record must be a static executable of at most 3 MiB once stripped, built from libc,
# libstdc++, lz4 and Boost.Program_options only: none of the workstation libraries (libipt, LLVM,
# protobuf, Zydis, elfutils, debuginfod) may reach it.
# usage: record_static_check.sh PT_RECORD
set -u
binary=$1
kind=$(file -b "$binary")
case "$kind" in
  *"statically linked"*) ;;
  *) echo "FAIL: $binary is not statically linked: $kind"; exit 1 ;;
esac
libraries='pt_(insn|pkt|qry|blk|enc|image|config)_|_ZN4llvm|_ZN6google8protobuf|Zydis'
libraries+='|debuginfod_|dwfl_|dwarf_|elf_begin'
foreign=$(nm "$binary" | grep -E " [TtWw] ($libraries)" | head -5)
[ -z "$foreign" ] || { echo "FAIL: $binary links a workstation library: $foreign"; exit 1; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
strip -o "$tmp" "$binary" || { echo "FAIL: strip failed"; exit 1; }
size=$(stat -c %s "$tmp")
limit=$((3 * 1024 * 1024))
echo "stripped size: $size bytes (limit $limit)"
[ "$size" -le "$limit" ] || { echo "FAIL: stripped size $size > $limit"; exit 1; }
echo "PASS"
