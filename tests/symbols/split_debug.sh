#!/bin/sh
# split_debug.sh IN STRIPPED DEBUG BARE: a separate debug file as distributions ship them
# (allocated sections such as .plt and .eh_frame become NOBITS in it), a stripped copy linking to
# it, and a stripped copy without the link (nothing can find its symbols).
set -eu
objcopy --only-keep-debug "$1" "$3"
objcopy --strip-all --add-gnu-debuglink="$3" "$1" "$2"
objcopy --strip-all "$1" "$4"
