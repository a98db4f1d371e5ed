#!/usr/bin/env python3
"""QueryWalker against libipt's block decoder, block for block (ipt-block-loop --compare-walker).

The walker reads packets with our PacketQuery, as in pt-decode, and again with libipt's query
decoder (its fallback). Captures: pt-synth random walks over two corpus binaries in every timing
mode, with and without return compression, with a small PSB period and two threads; pt-emulate
recordings of corpus programs (signals, exceptions, threads, dlopen); and the synth walks again
with damaged bytes, where both decoders must meet the same errors and resynchronize alike; and
with overflows put in as the hardware writes them (ipt-block-loop --overflow). Each comparison
must cover real work (blocks and events compared) and, on undamaged captures, overflows included,
the walker must refuse nothing.
Then pt-decode itself: its Perfetto output with the walker (the default) must equal, byte for byte,
its output with --libipt-blocks, on every clean capture (with no unit handed back to libipt), on
copies with overflows (exit 0, overflow gaps counted, no unit handed back: PacketQuery models
OVF) and on copies with one PT byte inverted (where units may be handed back).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
import ptar_edit  # noqa: E402  (damages PT bytes inside a .ptar, keeping it well-formed)
from walker_captures import emulate_captures, synth_captures  # noqa: E402

DAMAGE_SEEDS = [1, 2, 3]
OVERFLOW_SEEDS = [1, 2]


def compare(loop, archive, damage=None, libipt_packets=False, overflow=None):
    command = ([loop] + (["--libipt-packets"] if libipt_packets else []) +
               (["--damage", str(damage)] if damage else []) +
               (["--overflow", str(overflow)] if overflow else []) + ["--compare-walker", archive])
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    counts = dict(re.findall(r"(\w+)=(\d+)", result.stdout))
    return result, {key: int(value) for key, value in counts.items()}


def check(name, result, counts, damaged):
    problems = []
    # Damaged trace makes libipt report errors (exit 1); a difference is reported on stderr.
    if "differs" in result.stderr or (not damaged and result.returncode != 0):
        problems.append(f"{name}: exit {result.returncode}: {result.stderr.strip()}")
    if counts.get("compared_blocks", 0) < 1000 or counts.get("compared_events", 0) < 10:
        problems.append(f"{name}: too little compared: {result.stdout.strip()}")
    if not damaged and counts.get("unsupported", 0) != 0:
        problems.append(f"{name}: the walker refused {counts['unsupported']} stretches")
    return problems


def with_overflows(loop, archive, seed, work):
    """A copy of ARCHIVE (one PT stream) with ipt-block-loop --overflow SEED's overflows."""
    stream = os.path.join(work, "overflows.pt")
    subprocess.run([loop, "--overflow", str(seed), "--write-pt", stream, archive], check=True,
                   timeout=600)
    copy = os.path.join(work, f"overflows-{seed}-{os.path.basename(archive)}")
    with open(stream, "rb") as f:
        ptar_edit.replace_pt_stream(archive, copy, f.read())
    return copy


def compare_decoder(decoder, archive, work, damaged=False, overflows=False):
    outputs = []
    for extra in ([], ["--libipt-blocks"]):
        output = os.path.join(work, "decoded-%d.pftrace" % len(outputs))
        result = subprocess.run([decoder, "--jobs", "1", "-o", output] + extra + [archive],
                                capture_output=True, text=True, timeout=600)
        # Damaged trace decodes with gaps: partial (exit 3), the same for both decoders.
        if result.returncode != (3 if damaged else 0):
            return [f"pt-decode {' '.join(extra)} {archive}: exit {result.returncode}: "
                    f"{result.stderr.strip()}"]
        if not damaged and not extra and ("walker does not model" in result.stderr or
                                          "query decoder does not model" in result.stderr):
            return [f"pt-decode {archive}: units handed to libipt: {result.stderr.strip()}"]
        if overflows and not re.search(r"overflow_gaps: [1-9]", result.stderr):
            return [f"pt-decode {' '.join(extra)} {archive}: no overflow gap counted: "
                    f"{result.stderr.strip()}"]
        with open(output, "rb") as f:
            outputs.append(f.read())
    if len(outputs[0]) < 1000:
        return [f"pt-decode {archive}: only {len(outputs[0])} bytes of output"]
    if outputs[0] != outputs[1]:
        return [f"pt-decode {archive}: the walker's output differs from --libipt-blocks'"]
    return []


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--loop", required=True)
    parser.add_argument("--synth", required=True)
    parser.add_argument("--emulate", required=True)
    parser.add_argument("--decoder", required=True)
    parser.add_argument("--binary", action="append", required=True)
    parser.add_argument("--programs", required=True, help="directory of the corpus programs")
    args = parser.parse_args()
    problems = []
    with tempfile.TemporaryDirectory() as work:
        synth_archives = []
        for name, archive in synth_captures(args.synth, args.binary, work, problems):
            synth_archives.append(archive)
            problems += check(name, *compare(args.loop, archive), False)
            # (The walker over libipt's query decoder: pt-decode's fallback for what our
            # PacketQuery refuses.)
            problems += check(name + " (libipt packets)",
                              *compare(args.loop, archive, libipt_packets=True), False)
            problems += compare_decoder(args.decoder, archive, work)
        for name, archive in emulate_captures(args.emulate, args.programs, work, problems):
            problems += check(name, *compare(args.loop, archive), False)
            problems += check(name + " (libipt packets)",
                              *compare(args.loop, archive, libipt_packets=True), False)
            problems += compare_decoder(args.decoder, archive, work)
        for index, archive in enumerate(synth_archives[:2]):
            for after_psb in (40, 700, 9000):
                damaged = os.path.join(work, f"damaged-{index}-{after_psb}.ptar")
                ptar_edit.flip_pt_byte(archive, damaged, after_psb)
                problems += compare_decoder(args.decoder, damaged, work, damaged=True)
        for seed in DAMAGE_SEEDS:
            for archive in synth_archives[:2]:
                name = f"{os.path.basename(archive)} damaged (seed {seed})"
                problems += check(name, *compare(args.loop, archive, seed), True)
        for seed in OVERFLOW_SEEDS:
            for archive in synth_archives:
                name = f"{os.path.basename(archive)} with overflows (seed {seed})"
                problems += check(name, *compare(args.loop, archive, overflow=seed), False)
                if "2threads" not in archive:  # (--write-pt: one stream)
                    problems += compare_decoder(args.decoder,
                                                with_overflows(args.loop, archive, seed, work),
                                                work, overflows=True)
    for problem in problems:
        print(problem)
    print("walker_diff:", "FAIL" if problems else "ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
