#!/usr/bin/env python3
"""PacketQuery against libipt's query decoder, call for call (ipt-block-loop --compare-query).

The captures walker_diff uses: pt-synth random walks over two corpus binaries in every timing mode
(cyc, mtc, tsc, none), with and without return compression; pt-emulate recordings of corpus
programs; the synth walks again with overflows put in as the hardware writes them (ipt-block-loop
--overflow: OVF bound to a FUP, or alone before a TIP.PGE, with and without a PSB+ or timing
packets between), and with damaged bytes; and the decode fuzz corpus and regression inputs
(--compare-query-raw). Every answer must be the same (the tool fails at the first difference). On
undamaged captures, overflows included, PacketQuery must refuse nothing and the comparison must
cover real work (with overflows: overflow events); on damaged ones it may refuse (it does not
model damage), and the comparison goes on from the next PSB.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

from walker_captures import emulate_captures, synth_captures

DAMAGE_SEEDS = [1, 2, 3, 4, 5]
OVERFLOW_SEEDS = [1, 2, 3]


def run(command):
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    counts = {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", result.stdout)}
    return result, counts


def check(name, result, counts, damaged, minimum=1000, overflows=0):
    if result.returncode != 0:
        return [f"{name}: exit {result.returncode}: {result.stderr.strip()}"]
    problems = []
    if (counts.get("compared_queries", 0) < minimum or counts.get("compared_events", 0) < 10 or
            counts.get("compared_overflows", 0) < overflows):
        problems.append(f"{name}: too little compared: {result.stdout.strip()}")
    if not damaged and counts.get("refused", 0) != 0:
        problems.append(f"{name}: PacketQuery refused {counts['refused']} traces")
    print(f"{name}: {result.stdout.strip().splitlines()[-1]}")
    return problems


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--loop", required=True)
    parser.add_argument("--synth", required=True)
    parser.add_argument("--emulate", required=True)
    parser.add_argument("--binary", action="append", required=True)
    parser.add_argument("--programs", required=True, help="directory of the corpus programs")
    parser.add_argument("--fuzz-base", required=True, help="decode_base.ptar")
    parser.add_argument("--fuzz-inputs", action="append", required=True,
                        help="a directory of decode fuzz inputs")
    args = parser.parse_args()
    problems = []
    with tempfile.TemporaryDirectory() as work:
        synth_archives = []
        for name, archive in synth_captures(args.synth, args.binary, work, problems):
            synth_archives.append(archive)
            problems += check(name, *run([args.loop, "--compare-query", archive]), False)
        for name, archive in emulate_captures(args.emulate, args.programs, work, problems):
            problems += check(name, *run([args.loop, "--compare-query", archive]), False)
        for seed in OVERFLOW_SEEDS:
            for archive in synth_archives:
                name = f"{os.path.basename(archive)} with overflows (seed {seed})"
                problems += check(name, *run([args.loop, "--overflow", str(seed), "--compare-query",
                                              archive]), False, overflows=2)
        for seed in DAMAGE_SEEDS:
            for archive in synth_archives:
                name = f"{os.path.basename(archive)} damaged (seed {seed})"
                problems += check(name, *run([args.loop, "--damage", str(seed), "--compare-query",
                                              archive]), True)
        inputs = []
        for directory in args.fuzz_inputs:
            inputs += sorted(os.path.join(directory, f) for f in os.listdir(directory))
        if len(inputs) < 5:
            problems.append(f"only {len(inputs)} fuzz inputs in {args.fuzz_inputs}")
        # (Fuzz inputs are small and partly damaged: refusals allowed, little work required.)
        problems += check("fuzz inputs", *run([args.loop, "--compare-query-raw", args.fuzz_base] +
                                              inputs), True, minimum=100)
    for problem in problems:
        print(problem)
    print("query_diff:", "FAIL" if problems else "ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
