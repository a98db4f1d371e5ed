#!/bin/sh
# Makes a Fedora-style binary: fully stripped, plus .gnu_debugdata holding an xz-compressed ELF
# with only .symtab (debug sections removed). Also writes `nm` of the original as the oracle.
# Usage: debuginfod_make_minidebuginfo.sh IN OUT NM_OUT
set -eu
in=$1 out=$2 nm_out=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
objcopy --only-keep-debug "$in" "$tmp/debug"
objcopy --strip-debug --remove-section .comment "$tmp/debug" "$tmp/mini"
xz --keep --stdout "$tmp/mini" > "$tmp/mini.xz"
objcopy --strip-all "$in" "$tmp/stripped"
objcopy --add-section .gnu_debugdata="$tmp/mini.xz" "$tmp/stripped" "$out"
nm --defined-only "$in" > "$nm_out"
