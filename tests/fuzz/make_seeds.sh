#!/usr/bin/env bash
# Regenerates the fuzz seeds (tests/fuzz/corpus/*) and the decode target's base capture from real
# captures made with this tree's build/ (pt-emulate, pt-archive). Run it by hand when a format
# changes; the seeds are checked in, reviewed for size (each a few KiB; the decode base, with
# the modules it maps embedded so that it decodes on any host, about 1.3 MiB).
# usage: tests/fuzz/make_seeds.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
emulate=$build/tools/pt-emulate archive=$build/tools/pt-archive
work=$(mktemp -d /tmp/ptscope-seeds.XXXXXX)
trap 'rm -rf "$work"' EXIT
corpus=$here/corpus
rm -rf "$corpus"
mkdir -p "$corpus"/{archive,perf_data,jitdump,perf_map,elf,sideband,decode}
cd "$work"

# Captures: one thread from main (the decode base), a snapshot, per-CPU snapshots of four
# threads, and JIT code (jitdump and perf map).
"$emulate" --full --start-at main -o calls.ptar -- "$build/tests/programs/corpus-calls" >/dev/null
"$emulate" --snapshot-size 2K -o snap.ptar -- "$build/tests/programs/corpus-recursion" >/dev/null
"$emulate" --cpus 2 --timeslice 5000 --snapshot-size 2K -o cpus.ptar \
  -- "$build/tests/programs/corpus-threads" >/dev/null
"$emulate" --full --start-at main -o jit.ptar -- "$build/tests/e2e/jit/jit_program" >/dev/null
"$archive" embed calls.ptar --symbols "$build/tests/programs" -o "$here/decode_base.ptar" >/dev/null
cp calls.ptar snap.ptar cpus.ptar jit.ptar "$corpus/archive/"

"$archive" export-perf calls.ptar -o "$corpus/perf_data/calls.data"
"$archive" export-perf cpus.ptar -o "$corpus/perf_data/cpus.data"

"$archive" extract jit.ptar jit.d >/dev/null
for f in jit.d/*-jitdump-*; do cp "$f" "$corpus/jitdump/$(basename "$f")"; done
for f in jit.d/*-perf-map-*; do cp "$f" "$corpus/perf_map/$(basename "$f")"; done

cp "$build/tests/programs/corpus-calls-nosyms" "$corpus/elf/program"
"$archive" extract calls.ptar calls.d >/dev/null
cp calls.d/*-vdso-* "$corpus/elf/vdso"

# Sideband: the layout byte (sample_id_all | TID | TIME | IDENTIFIER | CPU, as pt-emulate writes
# them) and the records of the per-CPU capture (COMM, MMAP2, SWITCH_CPU_WIDE, ...).
"$build/tests/fuzz/make_decode_seed" cpus.ptar cpus.seed
python3 - cpus.seed "$corpus/sideband/cpus" <<'PY'
import sys
data = open(sys.argv[1], 'rb').read()
pt = int.from_bytes(data[:4], 'little')
open(sys.argv[2], 'wb').write(bytes([0x1f]) + data[4 + pt:])
PY
"$build/tests/fuzz/make_decode_seed" "$here/decode_base.ptar" "$corpus/decode/calls"
ls -l "$here/decode_base.ptar" "$corpus"/*/*
