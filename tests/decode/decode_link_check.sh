#!/bin/bash
# pt-decode must not load libLLVM.so or libdebuginfod when it starts: the first's 23,000 symbol
# relocations and the second's libcurl/GnuTLS/Kerberos/ICU chain cost every run ~25 ms before
# main(), serially, ahead of the decode workers (LLVM is linked from its static archives,
# libdebuginfod is loaded with dlopen on the first download). Also: nothing that could reach the
# network is loaded unless a debuginfod URL is configured.
# usage: decode_link_check.sh PT_DECODE
set -u
binary=$1
needed=$(readelf -d "$binary" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
[ -n "$needed" ] || { echo "FAIL: readelf found no NEEDED entries in $binary"; exit 1; }
echo "NEEDED: $(echo $needed)"
status=0
for lib in $needed; do
  case "$lib" in
    libLLVM*|libdebuginfod*|libcurl*) echo "FAIL: $binary needs $lib at start-up"; status=1 ;;
  esac
done
# And at run time: the loader maps no such library for a plain --help.
loaded=$(LD_DEBUG=files "$binary" --help 2>&1 >/dev/null |
  sed -n 's/.*file=\([^ ]*\).*/\1/p' | sort -u)
for lib in $loaded; do
  case "$lib" in
    *libLLVM*|*libdebuginfod*|*libcurl*) echo "FAIL: $binary loads $lib at start-up"; status=1 ;;
  esac
done
[ $status -eq 0 ] && echo "PASS"
exit $status
