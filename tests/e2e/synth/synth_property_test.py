#!/usr/bin/env python3
"""Property test of pt-synth: decode(walk) == walk.

For each corpus binary, seed and encoder variant, pt-synth writes a capture plus its ground truth
(`TID 0xADDRESS` per instruction of the walk); the libipt oracle (ipt_insns) must print exactly the
same lines, and so must `pt-decode --format insns`.
Variants cover return compression on/off, every timing mode, a small PSB period (many PSB+ and
last-IP/return-stack resets) and two threads (two streams, FORK sideband). And a 900 M-instruction
walk ends within a million instructions of its length (it once looped forever).
A per-CPU walk of 2 M instructions (4 threads on 2 CPUs) is listed by thread: each thread's
instructions in the walk's order; its runs are more than the listing keeps in memory (1 MiB
encoded, decode/src/listing/run_store.h), so they come back from its scratch file, and again
with no usable scratch directory (kept in memory), the same bytes.
"""
import argparse
import os
import subprocess
import sys
import tempfile

INSTRUCTIONS = 30000
SEEDS = [1, 2, 3]
VARIANTS = {
    "cyc": ["--psb-period", "512"],
    "noretcomp": ["--psb-period", "512", "--no-retcomp"],
    "mtc-2threads": ["--psb-period", "1024", "--timing", "mtc", "--threads", "2"],
    "tsc": ["--psb-period", "256", "--timing", "tsc"],
    "none-noretcomp": ["--psb-period", "4096", "--timing", "none", "--no-retcomp"],
}


def first_difference(expected_path, actual_path):
    with open(expected_path) as e, open(actual_path) as a:
        for number, (want, got) in enumerate(zip(e, a), 1):
            if want != got:
                return f"line {number}: expected {want.strip()!r}, got {got.strip()!r}"
    lengths = [sum(1 for _ in open(p)) for p in (expected_path, actual_path)]
    return f"expected {lengths[0]} lines, got {lengths[1]}"


def check_truth(path, threads):
    """The walk itself must be plausible: enough instructions, one listing per thread."""
    tids = set()
    count = 0
    with open(path) as truth:
        for line in truth:
            tids.add(line.split()[0])
            count += 1
    problems = []
    if count < INSTRUCTIONS:
        problems.append(f"ground truth has {count} instructions, asked for {INSTRUCTIONS}")
    if len(tids) != threads:
        problems.append(f"ground truth has {len(tids)} threads, asked for {threads}")
    return problems


def run_case(args, binary, seed, name, extra, work):
    base = os.path.join(work, f"{os.path.basename(binary)}-{name}-{seed}")
    archive, truth = base + ".ptar", base + ".truth"
    synth = [args.synth, "-o", archive, "--binary", binary, "--instructions", str(INSTRUCTIONS),
             "--seed", str(seed), "--ground-truth", truth] + extra
    result = subprocess.run(synth, capture_output=True, text=True)
    if result.returncode != 0:
        return [f"pt-synth failed ({result.returncode}): {result.stderr.strip()}"]
    threads = int(extra[extra.index("--threads") + 1]) if "--threads" in extra else 1
    problems = check_truth(truth, threads)
    decoders = [("ipt_insns", [args.oracle, archive]),
                ("pt-decode", [args.decoder, "--format", "insns", "-o", base + ".pt-decode", archive])]
    for decoder, command in decoders:
        listing = base + "." + decoder
        if decoder == "ipt_insns":
            with open(listing, "w") as out:
                result = subprocess.run(command, stdout=out, stderr=subprocess.PIPE, text=True)
        else:
            result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            problems.append(f"{decoder} failed ({result.returncode}): {result.stderr.strip()[:300]}")
            continue
        with open(truth, "rb") as want, open(listing, "rb") as got:
            if want.read() != got.read():
                problems.append(f"{decoder} differs from the ground truth: {first_difference(truth, listing)}")
    return problems


def check_long_walk_ends(args, binary, work):
    """A long walk ends near its length. Seed 1 over corpus-static once reached a spin loop whose
    only exit leads to a syscall retry loop the walk avoids, and ran forever past 850 M
    instructions; loops are left now, whatever they lead to."""
    archive = os.path.join(work, "long.ptar")
    want = 900_000_000
    try:
        result = subprocess.run([args.synth, "-o", archive, "--binary", binary, "--instructions",
                                 str(want), "--seed", "1"], capture_output=True, text=True,
                                timeout=120)
    except subprocess.TimeoutExpired:
        return [f"a {want}-instruction walk did not end within 120 s"]
    finally:
        if os.path.exists(archive):
            os.remove(archive)
    if result.returncode != 0:
        return [f"pt-synth failed ({result.returncode}): {result.stderr.strip()}"]
    words = result.stderr.split()
    got = int(words[words.index("instructions,") - 1]) if "instructions," in words else -1
    if not want <= got <= want + 1_000_000:
        return [f"a {want}-instruction walk ran {got} instructions: {result.stderr.strip()}"]
    return []


def check_percpu_listing(args, binary, work):
    archive, truth = os.path.join(work, "percpu.ptar"), os.path.join(work, "percpu.truth")
    result = subprocess.run([args.synth, "-o", archive, "--binary", binary, "--instructions",
                             "2000000", "--seed", "4", "--threads", "4", "--cpus", "2",
                             "--timeslice", "2000", "--ground-truth", truth],
                            capture_output=True, text=True)
    if result.returncode != 0:
        return [f"pt-synth failed ({result.returncode}): {result.stderr.strip()}"]
    # The walk's lines grouped by thread (in tid order), each thread's in the walk's order.
    by_thread = {}
    with open(truth, "rb") as lines:
        for line in lines:
            by_thread.setdefault(int(line.split()[0]), []).append(line)
    want = b"".join(b"".join(by_thread[tid]) for tid in sorted(by_thread))
    problems = []
    if len(by_thread) != 4:
        problems.append(f"the walk ran {len(by_thread)} threads, asked for 4")
    scratch = os.path.join(work, "scratch")
    os.mkdir(scratch)
    for label, tmpdir in (("scratch file", scratch), ("in memory", os.path.join(work, "none"))):
        listing = os.path.join(work, f"percpu-{label.replace(' ', '-')}.insns")
        result = subprocess.run([args.decoder, "--format", "insns", "-j1", "-o", listing, archive],
                                capture_output=True, text=True, env=dict(os.environ, TMPDIR=tmpdir))
        if result.returncode != 0:
            problems.append(f"{label}: pt-decode failed ({result.returncode}): "
                            f"{result.stderr.strip()[:300]}")
            continue
        with open(listing, "rb") as got:
            if got.read() != want:
                problems.append(f"{label}: the listing is not the walk's, thread by thread")
        # The summary counts the walk's threads, not the capture's 2 CPU streams.
        if not result.stderr.startswith(f"pt-decode: {archive}: 4 threads, "):
            problems.append(f"{label}: the summary does not say 4 threads: "
                            f"{result.stderr.splitlines()[:1]}")
    if os.listdir(scratch):
        problems.append(f"pt-decode left files in its scratch directory: {os.listdir(scratch)}")
    return problems


def report(label, passed, problems):
    """Prints a case's problems (or that it passed); 1 when it failed."""
    for problem in problems:
        print(f"FAIL {label}: {problem}")
    if not problems:
        print(f"ok   {passed}")
    return 1 if problems else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--synth", required=True)
    parser.add_argument("--oracle", required=True)
    parser.add_argument("--decoder", required=True)
    parser.add_argument("--binary", action="append", required=True)
    args = parser.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory(prefix="synth-property-") as work:
        for binary in args.binary:
            for name, extra in VARIANTS.items():
                for seed in SEEDS:
                    label = f"{os.path.basename(binary)} {name} seed {seed}"
                    failures += report(label, label, run_case(args, binary, seed, name, extra, work))
        failures += report("per-CPU listing",
                           "a per-CPU listing past its memory buffer is the walk, thread by thread",
                           check_percpu_listing(args, args.binary[0], work))
        failures += report("long walk", "a 900 M-instruction walk ends",
                           check_long_walk_ends(args, args.binary[0], work))
    print(f"{failures} failing case(s)" if failures else "all cases decode to their walks")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
