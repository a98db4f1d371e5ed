#!/usr/bin/env python3
"""pt-decode end to end on a pt-emulate capture of corpus-calls:
1. `pt-decode --format insns` equals pt-emulate's ground truth, line for line;
2. on the default virtual clock (1 instruction = 1 ns) every leaf_a slice in the text output
   lasts exactly the number of instructions of leaf_a (counted with objdump, not by us).

  decode_core_e2e_test.py PT_EMULATE PT_DECODE PROGRAM
"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path


def leaf_instruction_count(program):
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", program], check=True,
                         capture_output=True, text=True).stdout
    body = out.split("<leaf_a>:\n", 1)[1].split("\n\n", 1)[0]
    return len([line for line in body.splitlines() if line.strip()])


def main():
    emulate, decode, program = sys.argv[1:4]
    with tempfile.TemporaryDirectory(prefix="decode_core_e2e_") as work:
        work = Path(work)
        archive, truth = work / "calls.ptar", work / "truth.txt"
        subprocess.run([emulate, "--full", "-o", str(archive), "--ground-truth", str(truth), "--",
                        program], check=True, capture_output=True)
        insns = work / "decoded.insns"
        subprocess.run([decode, "--format", "insns", "-o", str(insns), str(archive)], check=True,
                       capture_output=True)
        expected = truth.read_text().splitlines()
        got = insns.read_text().splitlines()
        if got != expected:
            first = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b),
                         min(len(got), len(expected)))
            print(f"FAIL insns: {len(got)} decoded vs {len(expected)} executed; first difference "
                  f"at line {first + 1}: {got[first:first + 1]} vs {expected[first:first + 1]}")
            return 1
        text = work / "calls.txt"
        subprocess.run([decode, "-o", str(text), str(archive)], check=True, capture_output=True)
        durations = [int(m.group(1)) for m in
                     re.finditer(r"\[\d+ \+(\d+)\] leaf_a\b", text.read_text())]
        want = leaf_instruction_count(program)
        if not durations or any(d != want for d in durations):
            print(f"FAIL timing: leaf_a slices last {durations}, leaf_a has {want} instructions")
            return 1
        print(f"ok: {len(expected)} instructions identical; {len(durations)} leaf_a slices of "
              f"{want} ns each")
        return 0


if __name__ == "__main__":
    sys.exit(main())
