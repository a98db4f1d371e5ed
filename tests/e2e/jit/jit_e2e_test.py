#!/usr/bin/env python3
"""JIT code end to end: record jit_program with pt-emulate (--full), delete the jitdump and the
perf map it wrote (pt-emulate copied them into the archive), decode with pt-decode --format text
and check the call tree through the JIT code:

  main
    jit_add  jit_program.js:42      named from the jitdump (with its DEBUG_INFO line)
      jit_mul                        JIT -> JIT call, decoded from the jitdump's code bytes
        native_twice  jit_program.c  JIT -> native call through a register
    jit_mapped_only                  named from the perf map only: no bytes, so a missing-code gap

  jit_e2e_test.py PT_EMULATE PT_DECODE JIT_PROGRAM
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

LINE = re.compile(r"^( *)\[(\d+)(?: \+(\d+))?\] (.*)$")


def parse(text):
    """(depth, name-and-rest) per slice line of the first thread."""
    rows = []
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            rows.append((len(m.group(1)) // 2, m.group(4)))
    return rows


def subtree(rows, index):
    depth = rows[index][0]
    out = []
    for d, text in rows[index + 1:]:
        if d <= depth:
            break
        out.append((d - depth, text))
    return out


def main():
    emulate, decode, program = (os.path.abspath(a) for a in sys.argv[1:4])
    with tempfile.TemporaryDirectory(prefix="jit_e2e_") as work:
        archive = os.path.join(work, "jit.ptar")
        truth = os.path.join(work, "truth.txt")
        rec = subprocess.run([emulate, "--full", "--ground-truth", truth, "-o", archive, "--",
                              program], cwd=work, capture_output=True, text=True)
        if rec.returncode != 0:
            print(f"FAIL pt-emulate exited {rec.returncode}: {rec.stderr.strip()}")
            return 1
        dumps = glob.glob(os.path.join(work, "jit-*.dump"))
        if len(dumps) != 1:
            print(f"FAIL expected one jit-PID.dump, found {dumps}")
            return 1
        pid = re.search(r"jit-(\d+)\.dump$", dumps[0]).group(1)
        perf_map = f"/tmp/perf-{pid}.map"
        os.unlink(dumps[0])
        if os.path.exists(perf_map):
            with open(perf_map, encoding="ascii") as f:
                jit_addresses = {line.split()[2]: int(line.split()[0], 16) for line in f}
            os.unlink(perf_map)
        else:
            print(f"FAIL {perf_map} was not written")
            return 1
        text_path = os.path.join(work, "jit.txt")
        dec = subprocess.run([decode, "--format", "text", "-o", text_path, archive],
                             capture_output=True, text=True)
        # jit_mapped_only's code is known from the perf map only (no bytes): a missing-code gap,
        # so the decode is partial (exit 3) and says so.
        if dec.returncode != 3 or "executed code was not found (1 gap in the trace)" not in dec.stderr:
            print(f"FAIL pt-decode exited {dec.returncode} (want 3, one missing-code gap): "
                  f"{dec.stderr.strip()}")
            return 1
        text = open(text_path, encoding="utf-8").read()
        rows = parse(text)
        adds = [i for i, (_, t) in enumerate(rows) if re.match(r"jit_add\b", t)]
        if len(adds) != 1:
            print(f"FAIL expected one jit_add slice, found {len(adds)}\n{text[-3000:]}")
            return 1
        got = [(d, t.split("  ")[0]) for d, t in [(0, rows[adds[0]][1])] + subtree(rows, adds[0])]
        want = [(0, "jit_add"), (1, "jit_mul"), (2, "native_twice")]
        problems = []
        if got != want:
            problems.append(f"jit_add subtree is {got}, want {want}")
        if "jit_program.js:42" not in rows[adds[0]][1]:
            problems.append(f"jit_add has no jitdump line: {rows[adds[0]][1]!r}")
        if not re.search(r"native_twice\s+.*jit_program\.c:\d+", text):
            problems.append("native_twice is not symbolized with its source line")
        # The perf-map-only function is named at its call, then decoding stops (missing code).
        after = rows[adds[0] + len(got):]
        names = [t.split("  ")[0] for _, t in after]
        if "jit_mapped_only" not in names:
            problems.append(f"no jit_mapped_only slice after jit_add: {names[:5]}")
        if "missing code" not in text and "no code bytes" not in text:
            problems.append("no missing-code gap for the perf-map-only function")
        # Instructions: exactly the executed ones (JIT code included) up to the first
        # instruction of jit_mapped_only, whose bytes nobody kept.
        insns_path = os.path.join(work, "jit.insns")
        listed = subprocess.run([decode, "--format", "insns", "-o", insns_path, archive],
                                capture_output=True, text=True)
        if listed.returncode != 3:  # partial, as above: jit_mapped_only has no code bytes
            print(f"FAIL pt-decode --format insns exited {listed.returncode} (want 3): "
                  f"{listed.stderr.strip()}")
            return 1
        decoded = open(insns_path, encoding="ascii").read().splitlines()
        executed = open(truth, encoding="ascii").read().splitlines()
        addresses = [int(line.split()[1], 16) for line in executed]
        stop = addresses.index(jit_addresses["jit_mapped_only"])
        if decoded != executed[:stop]:
            problems.append(f"insns: {len(decoded)} decoded, want the {stop} executed before "
                            "jit_mapped_only, identical")
        if jit_addresses["jit_add"] not in addresses[:stop]:
            problems.append("the ground truth never ran jit_add before jit_mapped_only")
        if problems:
            print("FAIL " + "\nFAIL ".join(problems) + "\n--- decoded ---\n" + text[-4000:])
            return 1
        print("ok: " + " > ".join(n for _, n in got) + f"; {stop} instructions identical to the "
              "ground truth; jit_mapped_only named, then a gap")
        return 0


if __name__ == "__main__":
    sys.exit(main())
