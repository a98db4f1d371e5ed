#!/usr/bin/env python3
"""Self-test of compare_insns.py: the comparison must catch every kind of difference."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_insns  # noqa: E402

GROUND_TRUTH = "1 0x10\n2 0x20\n1 0x11\n1 0x12\n2 0x21\n1 0x13\n"


def problems(actual, suffix=False):
    with tempfile.TemporaryDirectory() as work:
        expected_path, actual_path = f"{work}/gt.txt", f"{work}/actual.txt"
        with open(expected_path, "w", encoding="ascii") as out:
            out.write(GROUND_TRUTH)
        with open(actual_path, "w", encoding="ascii") as out:
            out.write(actual)
        return compare_insns.compare_files(expected_path, actual_path, suffix)[0]


def expect(name, result, needles):
    text = "\n".join(result)
    missing = [n for n in needles if n not in text]
    if (not needles and result) or missing:
        print(f"FAIL {name}: got {result!r}, wanted {needles!r}")
        return False
    return True


def main():
    checks = [
        # Threads interleave differently in a decoder's output: per-thread order is what counts.
        expect("equal", problems("2 0x20\n2 0x21\n1 0x10\n1 0x11\n1 0x12\n1 0x13\n"), []),
        expect("differs", problems("1 0x10\n1 0x11\n1 0x99\n1 0x13\n2 0x20\n2 0x21\n"),
               ["tid 1: first difference at instruction #2: expected 0x12, got 0x99"]),
        expect("short", problems("1 0x10\n1 0x11\n2 0x20\n2 0x21\n"),
               ["tid 1: first difference at instruction #2: expected 0x12, got <end>"]),
        expect("extra", problems(GROUND_TRUTH + "2 0x22\n"),
               ["tid 2: first difference at instruction #2: expected <end>, got 0x22"]),
        expect("missing thread", problems("1 0x10\n1 0x11\n1 0x12\n1 0x13\n"),
               ["tid 2: missing from the decoded output"]),
        expect("unknown thread", problems(GROUND_TRUTH + "3 0x30\n"), ["tid 3: not in the ground truth"]),
        expect("suffix", problems("1 0x12\n1 0x13\n2 0x20\n2 0x21\n", suffix=True), []),
        expect("suffix wrong", problems("1 0x11\n1 0x13\n", suffix=True),
               ["tid 1: first difference at instruction #0 of the tail (ground truth #2)"]),
        expect("suffix not proper", problems(GROUND_TRUTH, suffix=True),
               ["no thread's snapshot is shorter than its run"]),
        expect("suffix empty", problems("", suffix=True), ["the decoded output is empty"]),
    ]
    try:
        problems("1 0x10\nnot a line\n")
        checks.append(expect("bad line", ["no error"], ["BadInput"]))
    except compare_insns.BadInput as error:
        checks.append(expect("bad line", [str(error)], ["actual.txt:2: expected 'TID 0xADDRESS'"]))
    return 0 if all(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
