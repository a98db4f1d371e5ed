#!/bin/sh
# same_as_baseline.sh BASELINE_PT_EMULATE NEW_PT_EMULATE PT_ARCHIVE PROGRAM...
# Per-thread mode (no --cpus) must not change: runs both pt-emulate binaries on each PROGRAM with
# fixed addresses and pids (setarch -R, a new pid namespace; needs root), in --full and in
# --snapshot-size 4096 mode, exports both archives to perf.data (PT bytes, sideband, AUXTRACE
# headers) and compares them and the ground truth files byte for byte. Single-threaded programs
# only: a multi-threaded run's interleaving differs from run to run even with one binary. Not a
# meson test: the baseline is a build of the commit before the change under review.
set -eu
base=$1 new=$2 archive=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for prog in "$@"; do
  name=$(basename "$prog")
  for mode in full snapshot; do
    if [ $mode = full ]; then opts=--full; else opts="--snapshot-size 4096"; fi
    for which in base new; do
      if [ $which = base ]; then bin=$base; else bin=$new; fi
      # shellcheck disable=SC2086
      setarch -R unshare -pf --mount-proc "$bin" $opts --ground-truth "$work/$which.gt" \
        -o "$work/$which.ptar" -- "$prog" >/dev/null 2>&1
      "$archive" export-perf "$work/$which.ptar" -o "$work/$which.data"
    done
    if cmp -s "$work/base.data" "$work/new.data" && cmp -s "$work/base.gt" "$work/new.gt"; then
      echo "$name $mode: identical"
    else
      echo "$name $mode: DIFFERENT" >&2
      status=1
    fi
  done
done
exit $status
