#!/bin/sh
# split_debug.sh IN DEBUG_OUT STRIPPED_OUT NOSYMS_OUT
# The debug-file layout distributions ship: DEBUG_OUT holds only the debug info; STRIPPED_OUT has
# its DWARF removed (symtab kept) and NOSYMS_OUT has everything removed; both name DEBUG_OUT in a
# .gnu_debuglink section (basename + CRC), so a symbolizer must find it next to the binary.
set -eu
in=$1 debug=$2 stripped=$3 nosyms=$4
objcopy --only-keep-debug "$in" "$debug"
objcopy --strip-debug --add-gnu-debuglink="$debug" "$in" "$stripped"
objcopy --strip-all --add-gnu-debuglink="$debug" "$in" "$nosyms"
