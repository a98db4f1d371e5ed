#!/usr/bin/env python3
"""One differential end-to-end test: record a corpus program with pt-emulate, decode the archive
with the libipt oracle and with pt-decode, compare both with the ground truth.

  run_e2e.py --emulate PT_EMULATE --oracle IPT_INSNS --decoder PT_DECODE \
             --variant VARIANT -- PROGRAM [ARGS...]

Variants: see VARIANTS. Full-capture variants must reproduce the ground truth exactly; snapshot
must reproduce a tail of it.
The work directory is removed on success and kept (and named) on failure.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
import compare_insns  # noqa: E402

PSB_PERIOD = "256"       # small, so every stream has many PSBs
SNAPSHOT_SIZE = "4096"   # far below the tens of KiB a corpus run produces

# Single-stepping costs ~0.1 ms per instruction and ld.so startup is ~100k instructions, so only
# full and snapshot trace the whole run; the other variants start tracing at main (pt-emulate runs
# the startup untraced at native speed). pt-emulate's default timing is cyc.
VARIANTS = {
    "full": ["--full"],
    "snapshot": ["--snapshot-size", SNAPSHOT_SIZE],
    "noretcomp": ["--full", "--no-retcomp", "--start-at", "main"],
    "timing-none": ["--full", "--timing", "none", "--start-at", "main"],
    "timing-tsc": ["--full", "--timing", "tsc", "--start-at", "main"],
    "timing-mtc": ["--full", "--timing", "mtc", "--start-at", "main"],
}


def run(command, log):
    log.append("$ " + " ".join(command))
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.stderr.strip():
        log.append(result.stderr.rstrip())
    return result


def check_listing(name, ground_truth, listing, suffix, log):
    problems, summary = compare_insns.compare_files(ground_truth, listing, suffix)
    log.append(f"{name}: {summary}")
    for problem in problems:
        log.append(f"{name}: MISMATCH {problem}")
    return not problems


def run_variant(args, work, log):
    archive = os.path.join(work, "x.ptar")
    ground_truth = os.path.join(work, "gt.txt")
    emulate = run([args.emulate, *VARIANTS[args.variant], "--psb-period", PSB_PERIOD,
                   "--ground-truth", ground_truth, "-o", archive, "--", *args.program], log)
    if emulate.returncode != 0:
        log.append(f"pt-emulate exited with {emulate.returncode}")
        return False
    if not os.path.exists(archive) or not os.path.exists(ground_truth):
        log.append("pt-emulate did not write the archive and the ground truth")
        return False
    log.append(f"archive: {os.path.getsize(archive)} bytes")
    suffix = args.variant == "snapshot"

    oracle_listing = os.path.join(work, "oracle.txt")
    with open(oracle_listing, "w", encoding="ascii") as out:
        oracle = subprocess.run([args.oracle, archive], stdout=out, stderr=subprocess.PIPE,
                                text=True, check=False)
    if oracle.stderr.strip():
        log.append(oracle.stderr.rstrip())
    ok = check_listing("libipt oracle", ground_truth, oracle_listing, suffix, log)
    if oracle.returncode != 0:
        log.append(f"libipt oracle exited with {oracle.returncode}")
        ok = False

    decoded = os.path.join(work, "decoded.insns")
    decode = run([args.decoder, "--format", "insns", "-o", decoded, archive], log)
    if decode.returncode != 0:
        log.append(f"pt-decode exited with {decode.returncode}")
        return False
    return check_listing("pt-decode", ground_truth, decoded, suffix, log) and ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for option in ("--emulate", "--oracle", "--decoder"):
        parser.add_argument(option, required=True)
    parser.add_argument("--variant", required=True, choices=sorted(VARIANTS))
    parser.add_argument("program", nargs="+")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix=f"e2e_{os.path.basename(args.program[0])}_{args.variant}_")
    log = []
    try:
        ok = run_variant(args, work, log)
    except (OSError, compare_insns.BadInput) as error:
        log.append(f"run_e2e: {error}")
        ok = False
    print("\n".join(log))
    if ok:
        shutil.rmtree(work, ignore_errors=True)
        return 0
    print(f"FAILED; inputs kept in {work}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
