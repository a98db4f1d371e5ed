#!/usr/bin/env python3
"""A jitdump torn at the capture's end, decoded elsewhere (issue #27): jit_program torn writes its
jitdump ending 24 bytes into jit_mapped_only's CODE_LOAD record, then runs jit_mapped_only.
pt-emulate keeps the whole records and writes the facts as metadata jit.torn.1.*; the jitdump
and perf map are then deleted (as on another machine), and:

  pt-archive info   lists jit.torn.1.* with their exact values
  pt-decode         exits 3 (missing code) and its summary says why, word for word

  jit_torn_test.py PT_EMULATE PT_DECODE PT_ARCHIVE JIT_PROGRAM
"""
import os
import re
import subprocess
import sys
import tempfile

# DEBUG_INFO (63) + jit_add's LOAD (78) + jit_mul's LOAD (96) after the 40-byte header.
KEPT = 40 + 63 + 78 + 96
RECORD = 56 + len("jit_mapped_only") + 1 + 5  # jit_mapped_only's CODE_LOAD
LOST = 24  # its 16-byte prefix, pid and tid


def main():
    emulate, decode, archive_tool, program = (os.path.abspath(a) for a in sys.argv[1:5])
    problems = []
    with tempfile.TemporaryDirectory(prefix="jit_torn_") as work:
        archive = os.path.join(work, "torn.ptar")
        rec = subprocess.run([emulate, "--full", "-o", archive, "--", program, "torn"], cwd=work,
                             capture_output=True, text=True)
        dumps = [f for f in os.listdir(work) if re.fullmatch(r"jit-\d+\.dump", f)]
        if rec.returncode != 0 or len(dumps) != 1:
            print(f"FAIL pt-emulate exited {rec.returncode}, jitdumps {dumps}: {rec.stderr.strip()}")
            return 1
        pid = re.fullmatch(r"jit-(\d+)\.dump", dumps[0]).group(1)
        dump = os.path.join(work, dumps[0])
        perf_map = f"/tmp/perf-{pid}.map"
        try:
            with open(perf_map, encoding="ascii") as f:
                addresses = {line.split()[2]: int(line.split()[0], 16) for line in f}
        finally:
            if os.path.exists(perf_map):
                os.unlink(perf_map)
        os.unlink(dump)  # decoded "on another machine": only the archive is left
        addr = addresses["jit_mapped_only"]

        warning = (f"pt-emulate: warning: {dump}: the last record (offset {KEPT}: {LOST} of "
                   f"{RECORD} bytes) was still being written when the capture ended and 200 ms "
                   f"later; kept its 3 whole records ({KEPT} bytes). Code logged from there on has "
                   f"no bytes, so running it decodes as a missing-code gap; {perf_map} names 1 "
                   f"function the jitdump lacks (jit_mapped_only at {addr:#x})")
        if warning not in rec.stderr.splitlines():
            problems.append(f"pt-emulate's warning is not\n  {warning}\nstderr:\n{rec.stderr}")

        info = subprocess.run([archive_tool, "info", archive], capture_output=True, text=True)
        want = [f"  jit.torn.1.pid = {pid}", f"  jit.torn.1.jitdump = {dump}",
                f"  jit.torn.1.bytes_kept = {KEPT}", f"  jit.torn.1.bytes_lost = {LOST}",
                f"  jit.torn.1.record_size = {RECORD}", "  jit.torn.1.records_kept = 3",
                "  jit.torn.1.waited_ms = 200", f"  jit.torn.1.perf_map = {perf_map}",
                "  jit.torn.1.code_count = 1", f"  jit.torn.1.code.1 = {addr:x} 5 jit_mapped_only"]
        got = [line for line in info.stdout.splitlines() if line.startswith("  jit.torn.")]
        if info.returncode != 0 or got != want:
            problems.append(f"pt-archive info exited {info.returncode}; jit.torn lines {got}, "
                            f"want {want}")

        out = os.path.join(work, "torn.txt")
        dec = subprocess.run([decode, "--format", "text", "-o", out, archive],
                             capture_output=True, text=True)
        note = (f"  note: JIT code without bytes: jitdump {dump} ended mid-record at offset {KEPT} "
                f"when the capture stopped; named from {perf_map}: jit_mapped_only at {addr:#x}")
        if dec.returncode != 3:
            problems.append(f"pt-decode exited {dec.returncode}, want 3 (partial: missing code)")
        if note not in dec.stderr.splitlines():
            problems.append(f"pt-decode's summary lacks\n{note}")
        if "executed code was not found (1 gap in the trace)" not in dec.stderr:
            problems.append("pt-decode does not report the one missing-code gap")
        if problems:
            print("FAIL " + "\nFAIL ".join(problems) + "\n--- pt-decode ---\n" + dec.stderr)
            return 1
    print(f"ok: jitdump torn at offset {KEPT} ({LOST} of {RECORD} bytes); the archive says so "
          "(jit.torn.1.*) and pt-decode names jit_mapped_only's gap and why, exit 3")
    return 0


if __name__ == "__main__":
    sys.exit(main())
