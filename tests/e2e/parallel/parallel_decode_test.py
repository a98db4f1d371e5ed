#!/usr/bin/env python3
"""PSB-unit parallel decoding (issue #8): the output does not depend on --jobs or on where the
stream is cut into decode units.

pt-decode cuts every PT stream into decode units at PSBs and decodes them on a worker pool, then
stitches the units back in order (decode/src/parallel/psb_units.h, unit_pool.h). For each capture:

1. --jobs 1 and --jobs 2 (and 3) write byte-identical Perfetto and text outputs, with the default
   units and with one unit per PSB (--unit-bytes 1: every join is exercised).
2. One unit per PSB against one unit for the whole stream (--unit-bytes 1G, i.e. a sequential
   decode): the same slices in the same nesting with the same names (text output with the
   timestamps removed), the same instruction total, and timestamps that differ by at most 2 ns
   are only reported (the PSB's TSC starts a unit; a sequential decoder interpolates across it).
   The summary's per-function calls, instructions and self instructions are identical.
3. The same walk stored in one PT chunk and in chunks of 1000 and 777 bytes decodes to the same
   Perfetto and instruction-listing bytes (PT is read again chunk by chunk where it is decoded).
4. --threads keeps only the named thread's track; --time-range keeps only slices inside the
   window, clipping the ones that cross its edges, and a window after the capture's end writes
   no slice and says so.

Captures: pt-synth random walks (PSB every 256 or 512 bytes, 1 and 2 threads, every timing
mode) and pt-emulate captures of corpus programs (threads, exceptions, signal) with PSB every 256
bytes.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

STAMP = re.compile(r"\[(\d+) \+(\d+)\]")


def run(cmd):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True)


def decode(args, archive, out, *extra):
    r = run([args.decoder, archive, "-o", out] + list(extra))
    if r.returncode != 0:
        raise RuntimeError(f"pt-decode {archive} {' '.join(extra)}: {r.stderr.strip()}")
    return r.stderr


def instructions(summary_text):
    m = re.search(r"([\d,]+) instructions", summary_text)
    return int(m.group(1).replace(",", "")) if m else -1


def structure(text):
    return [STAMP.sub("[]", line) for line in text.splitlines()]


def stamps(text):
    return [(int(a), int(b)) for a, b in STAMP.findall(text)]


def read(path):
    with open(path) as f:
        return f.read()


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def check_capture(args, archive, work, failures):
    name = os.path.basename(archive)
    base = os.path.join(work, name)
    # 1. byte identity across --jobs, default units and one unit per PSB.
    for units in (None, "1"):
        extra = [] if units is None else ["--unit-bytes", units]
        outs = {}
        for jobs in ("1", "2", "3"):
            for ext in ("pftrace", "txt"):
                out = f"{base}.u{units}.j{jobs}.{ext}"
                decode(args, archive, out, "--jobs", jobs, *extra)
                outs[(jobs, ext)] = read_bytes(out)
        for ext in ("pftrace", "txt"):
            for jobs in ("2", "3"):
                if outs[(jobs, ext)] != outs[("1", ext)]:
                    failures.append(f"{name}: --jobs {jobs} {ext} differs from --jobs 1 "
                                    f"(units {units or 'default'})")
    # 2. one unit per PSB against one unit for everything.
    whole = decode(args, archive, base + ".whole.txt", "--jobs", "1", "--unit-bytes", "1000000000")
    split = decode(args, archive, base + ".split.txt", "--jobs", "2", "--unit-bytes", "1")
    if instructions(whole) != instructions(split) or instructions(whole) <= 0:
        failures.append(f"{name}: {instructions(split)} instructions with one unit per PSB, "
                        f"{instructions(whole)} with one unit")
    a, b = read(base + ".whole.txt"), read(base + ".split.txt")
    if structure(a) != structure(b):
        sa, sb = structure(a), structure(b)
        line = next((i for i, (x, y) in enumerate(zip(sa, sb)) if x != y), min(len(sa), len(sb)))
        failures.append(f"{name}: slices differ between one unit and one unit per PSB at line "
                        f"{line + 1}: {sa[line:line+1]} vs {sb[line:line+1]}")
    else:
        # Not an equality: a unit starts from its PSB's TSC, which a sequential decoder (libipt
        # reports it as a status update) does not use, so with sparse timing the split decode
        # places events between timing packets differently (closer to the truth).
        worst = max((abs(x[0] - y[0]) for x, y in zip(stamps(a), stamps(b))), default=0)
        print(f"{name}: slice starts differ by at most {worst} ns between one unit and one "
              f"unit per PSB")
    decode(args, archive, base + ".whole.summary.txt", "--unit-bytes", "1000000000")
    decode(args, archive, base + ".split.summary.txt", "--unit-bytes", "1", "--jobs", "2")
    wa = summary_counts(read(base + ".whole.summary.txt"))
    wb = summary_counts(read(base + ".split.summary.txt"))
    if not wa or wa != wb:
        diff = sorted(k for k in set(wa) | set(wb) if wa.get(k) != wb.get(k))[:3]
        failures.append(f"{name}: --summary (calls, instructions, self instructions) per function "
                        f"differ between one unit and one unit per PSB: "
                        f"{[(k, wa.get(k), wb.get(k)) for k in diff]}")


def check_chunking(args, work, failures):
    """The same walk stored as one PT chunk and as chunks of 1000 or 777 bytes decodes to the same
    bytes: pt-decode reads chunks again where it decodes them (decode/src/capture/piece_reader.h), so
    units and PSB+ headers that span chunks are read across them."""
    outputs = {}
    for piece_size in ("1000000000", "1000", "777"):
        archive = os.path.join(work, f"chunks-{piece_size}.ptar")
        r = run([args.synth, "-o", archive, "--binary", args.walk_binary, "--instructions",
                 "60000", "--seed", "11", "--psb-period", "256", "--piece-size", piece_size])
        if r.returncode != 0:
            failures.append(f"pt-synth --piece-size {piece_size}: {r.stderr.strip()}")
            return
        for jobs, units in (("1", None), ("2", "1")):
            extra = ["--jobs", jobs] + ([] if units is None else ["--unit-bytes", units])
            for ext in ("pftrace", "insns"):
                out = os.path.join(work, f"chunks-{piece_size}.j{jobs}.{ext}")
                decode(args, archive, out, *extra)
                outputs[(piece_size, jobs, ext)] = read_bytes(out)
    for (piece_size, jobs, ext), data in sorted(outputs.items()):
        reference = outputs[("1000000000", jobs, ext)]
        if len(reference) < 1000:
            failures.append(f"one-chunk walk: only {len(reference)} bytes of {ext}")
        elif data != reference:
            failures.append(f"--piece-size {piece_size}: the {ext} output (--jobs {jobs}) differs "
                            f"from the one-chunk archive's")


def summary_counts(text):
    """function -> (calls, insns, self_insns) from every table of a --summary output."""
    counts, table = {}, ""
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 6 and all(f.isdigit() for f in fields[:6]):
            counts[(table, " ".join(fields[6:]))] = (fields[0], fields[4], fields[5])
        elif line and not line.startswith(" "):
            table = line
    return counts


def check_filters(args, archive, work, failures):
    """--threads keeps one track; --time-range clips to the window."""
    base = os.path.join(work, os.path.basename(archive))
    full = read(base + ".whole.txt") if os.path.exists(base + ".whole.txt") else None
    if full is None:
        decode(args, archive, base + ".whole.txt")
        full = read(base + ".whole.txt")
    all_stamps = stamps(full)
    if not all_stamps:
        failures.append(f"{archive}: no slices to filter")
        return
    start = min(s for s, _ in all_stamps)
    end = max(s + d for s, d in all_stamps)
    lo, hi = (end - start) // 4, (end - start) // 2
    out = base + ".window.txt"
    decode(args, archive, out, "--time-range", f"{lo}ns:{hi}ns")
    window = stamps(read(out))
    if not window:
        failures.append(f"{archive}: --time-range {lo}ns:{hi}ns kept no slice")
    for s, d in window:
        if s < start + lo or s + d > start + hi:
            failures.append(f"{archive}: --time-range {lo}ns:{hi}ns kept a slice "
                            f"[{s} +{d}] outside [{start + lo}, {start + hi}]")
            break
    # A window after the end of the capture: a usage error that says what the capture spans,
    # and no output.
    out_after = base + ".after.txt"
    r = run([args.decoder, archive, "-o", out_after, "--time-range", f"{end - start + 1000000}ns:"])
    if r.returncode != 2 or "lies outside the capture, which spans 0 ns to " not in r.stderr or \
            os.path.exists(out_after):
        failures.append(f"{archive}: --time-range after the capture's end: exit {r.returncode}, "
                        f"output {'left' if os.path.exists(out_after) else 'absent'}, stderr "
                        f"{r.stderr.strip()!r}")
    # Every slice of the full trace that lies inside the window is kept with its exact times.
    inside = sorted((s, d) for s, d in all_stamps if s >= start + lo and s + d <= start + hi)
    missing = [x for x in inside if x not in set(window)]
    if missing:
        failures.append(f"{archive}: --time-range dropped {len(missing)} slices that lie inside "
                        f"the window, e.g. {missing[0]}")


def check_threads(args, archive, work, failures):
    base = os.path.join(work, os.path.basename(archive))
    full = read(base + ".whole.txt")
    tids = re.findall(r"^thread \d+/(\d+)", full, re.M)
    tids = sorted(set(tids), key=tids.index)
    if len(tids) < 2:
        failures.append(f"{archive}: expected several threads, found {tids}")
        return
    out = base + ".one-thread.txt"
    decode(args, archive, out, "--threads", tids[1])
    kept = set(re.findall(r"^thread \d+/(\d+)", read(out), re.M))
    if kept != {tids[1]}:
        failures.append(f"{archive}: --threads {tids[1]} kept threads {sorted(kept)}")
    r = run([args.decoder, archive, "-o", out, "--threads", "999999"])
    if r.returncode == 0 or "--threads" not in r.stderr:
        failures.append(f"{archive}: --threads 999999 (no such thread): rc {r.returncode}, "
                        f"stderr {r.stderr.strip()!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--decoder", required=True)
    ap.add_argument("--synth", required=True)
    ap.add_argument("--emulate", required=True)
    ap.add_argument("--walk-binary", required=True)
    ap.add_argument("--program", action="append", default=[])
    args = ap.parse_args()
    failures = []
    with tempfile.TemporaryDirectory() as work:
        captures = []
        for name, extra in (("synth-cyc", ["--psb-period", "256"]),
                            ("synth-mtc-2threads", ["--psb-period", "512", "--timing", "mtc",
                                                    "--threads", "2"]),
                            ("synth-tsc", ["--psb-period", "256", "--timing", "tsc"])):
            archive = os.path.join(work, name + ".ptar")
            r = run([args.synth, "-o", archive, "--binary", args.walk_binary, "--instructions",
                     "60000", "--seed", "7"] + extra)
            if r.returncode != 0:
                failures.append(f"pt-synth {name}: {r.stderr.strip()}")
                continue
            captures.append(archive)
        threaded = None
        for program in args.program:
            archive = os.path.join(work, os.path.basename(program) + ".ptar")
            r = run([args.emulate, "--full", "--psb-period", "256", "-o", archive, "--", program])
            if r.returncode != 0:
                failures.append(f"pt-emulate {program}: {r.stderr.strip()}")
                continue
            captures.append(archive)
            if program.endswith("threads"):
                threaded = archive
        for archive in captures:
            try:
                check_capture(args, archive, work, failures)
            except RuntimeError as e:
                failures.append(str(e))
        try:
            check_chunking(args, work, failures)
        except RuntimeError as e:
            failures.append(str(e))
        try:
            check_filters(args, captures[-1], work, failures)
            if threaded:
                check_threads(args, threaded, work, failures)
        except (RuntimeError, IndexError) as e:
            failures.append(str(e))
    for failure in failures:
        print("FAIL: " + failure, file=sys.stderr)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
