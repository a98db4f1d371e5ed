#!/usr/bin/env python3
"""PacketQuery against libipt's query decoder, call for call (ipt-block-loop --compare-query).

The captures walker_diff uses: pt-synth random walks over two corpus binaries in every timing mode
(cyc, mtc, tsc, none), with and without return compression; pt-emulate recordings of corpus
programs; the synth walks again with damaged bytes; and the decode fuzz corpus and regression
inputs (--compare-query-raw). Every answer must be the same (the tool fails at the first
difference). On undamaged captures PacketQuery must refuse nothing and the comparison must cover
real work; on damaged ones it may refuse (it does not model damage), and the comparison goes on
from the next PSB.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

SYNTH_VARIANTS = {
    "cyc": ["--psb-period", "512"],
    "noretcomp": ["--psb-period", "512", "--no-retcomp"],
    "mtc-2threads": ["--psb-period", "1024", "--timing", "mtc", "--threads", "2"],
    "tsc": ["--psb-period", "256", "--timing", "tsc"],
    "none": ["--psb-period", "4096", "--timing", "none"],
}
EMULATE_VARIANTS = {
    "signal-mtc": ("signal", ["--timing", "mtc"]),
    "exceptions": ("exceptions", []),
    "threads-noretcomp": ("threads", ["--no-retcomp"]),
    "dlopen-psb256": ("dlopen", ["--psb-period", "256"]),
}
DAMAGE_SEEDS = [1, 2, 3, 4, 5]


def run(command):
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    counts = {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", result.stdout)}
    return result, counts


def check(name, result, counts, damaged, minimum=1000):
    if result.returncode != 0:
        return [f"{name}: exit {result.returncode}: {result.stderr.strip()}"]
    problems = []
    if counts.get("compared_queries", 0) < minimum or counts.get("compared_events", 0) < 10:
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
        for binary in args.binary:
            for name, extra in SYNTH_VARIANTS.items():
                archive = os.path.join(work, f"{os.path.basename(binary)}-{name}.ptar")
                made = subprocess.run([args.synth, "-o", archive, "--binary", binary,
                                       "--instructions", "300000", "--seed", "7"] + extra,
                                      capture_output=True, text=True)
                if made.returncode != 0:
                    problems.append(f"pt-synth {name}: {made.stderr.strip()}")
                    continue
                synth_archives.append(archive)
                problems += check(os.path.basename(archive),
                                  *run([args.loop, "--compare-query", archive]), False)
        for name, (program, extra) in EMULATE_VARIANTS.items():
            archive = os.path.join(work, f"emulate-{name}.ptar")
            made = subprocess.run([args.emulate, "--full", "-o", archive] + extra +
                                  ["--", os.path.join(args.programs, "corpus-" + program)],
                                  capture_output=True, text=True, timeout=600)
            if made.returncode != 0:
                problems.append(f"pt-emulate {name}: {made.stderr.strip()}")
                continue
            problems += check(name, *run([args.loop, "--compare-query", archive]), False)
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
