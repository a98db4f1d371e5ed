#!/usr/bin/env python3
"""Compares two `TID 0xADDRESS` instruction listings thread by thread.

  compare_insns.py [--suffix] EXPECTED ACTUAL

EXPECTED is the ground truth (pt-emulate --ground-truth); ACTUAL is a decoder's output (the libipt
oracle or pt-decode --format insns). Default: every thread's address sequence must be equal.
--suffix (snapshot captures): every decoded thread must be a non-empty tail of the same thread's
ground truth, and at least one thread must be a proper tail (the snapshot really dropped the start).
Prints the first difference with context; exit 0 when equal, 1 otherwise, 2 on bad input.
"""
import argparse
import sys

CONTEXT = 5


class BadInput(Exception):
    pass


def read_listing(path):
    """Returns {tid: [address, ...]} in file order."""
    threads = {}
    with open(path, encoding="ascii", errors="replace") as listing:
        for number, line in enumerate(listing, 1):
            fields = line.split()
            if len(fields) != 2 or not fields[1].startswith("0x"):
                raise BadInput(f"{path}:{number}: expected 'TID 0xADDRESS', got {line.rstrip()!r}")
            try:
                tid, address = int(fields[0]), int(fields[1], 16)
            except ValueError:
                raise BadInput(f"{path}:{number}: expected 'TID 0xADDRESS', got {line.rstrip()!r}")
            threads.setdefault(tid, []).append(address)
    return threads


def window(sequence, start, end):
    return " ".join(hex(a) for a in sequence[max(start, 0):max(end, 0)])


def describe_difference(tid, expected, actual, index, offset_note=""):
    return (f"tid {tid}: first difference at instruction #{index}{offset_note}: "
            f"expected {hex(expected[index]) if index < len(expected) else '<end>'}, "
            f"got {hex(actual[index]) if index < len(actual) else '<end>'}\n"
            f"  common before: {window(expected, index - CONTEXT, index)}\n"
            f"  expected next: {window(expected, index, index + CONTEXT)}\n"
            f"  actual next:   {window(actual, index, index + CONTEXT)}\n"
            f"  lengths: expected {len(expected)}, actual {len(actual)}")


def first_mismatch(expected, actual):
    for index, (want, got) in enumerate(zip(expected, actual)):
        if want != got:
            return index
    return None if len(expected) == len(actual) else min(len(expected), len(actual))


def compare_exact(expected, actual):
    problems = []
    for tid in sorted(set(expected) | set(actual)):
        if tid not in actual:
            problems.append(f"tid {tid}: missing from the decoded output "
                            f"({len(expected[tid])} instructions expected)")
        elif tid not in expected:
            problems.append(f"tid {tid}: not in the ground truth ({len(actual[tid])} decoded)")
        else:
            index = first_mismatch(expected[tid], actual[tid])
            if index is not None:
                problems.append(describe_difference(tid, expected[tid], actual[tid], index))
    return problems


def compare_suffix(expected, actual):
    problems = []
    proper_tail = False
    for tid in sorted(actual):
        got = actual[tid]
        want = expected.get(tid)
        if want is None:
            problems.append(f"tid {tid}: not in the ground truth ({len(got)} decoded)")
            continue
        if len(got) > len(want):
            problems.append(f"tid {tid}: {len(got)} decoded but only {len(want)} executed")
            continue
        tail = want[len(want) - len(got):]
        index = first_mismatch(tail, got)
        if index is not None:
            note = f" of the tail (ground truth #{len(want) - len(got) + index})"
            problems.append(describe_difference(tid, tail, got, index, note))
        proper_tail = proper_tail or len(got) < len(want)
    if not actual:
        problems.append("the decoded output is empty")
    elif not problems and not proper_tail:
        problems.append("no thread's snapshot is shorter than its run: the snapshot did not drop "
                        "anything (make --snapshot-size smaller than the trace)")
    return problems


def compare_files(expected_path, actual_path, suffix):
    expected = read_listing(expected_path)
    actual = read_listing(actual_path)
    problems = (compare_suffix if suffix else compare_exact)(expected, actual)
    counts = ", ".join(f"tid {tid}: {len(actual[tid])}/{len(expected.get(tid, []))}"
                       for tid in sorted(actual))
    return problems, f"decoded/executed per thread: {counts}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suffix", action="store_true")
    parser.add_argument("expected")
    parser.add_argument("actual")
    args = parser.parse_args()
    try:
        problems, summary = compare_files(args.expected, args.actual, args.suffix)
    except (OSError, BadInput) as error:
        print(f"compare_insns: {error}", file=sys.stderr)
        return 2
    print(summary)
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
