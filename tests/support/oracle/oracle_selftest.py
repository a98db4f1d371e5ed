#!/usr/bin/env python3
"""oracle_selftest.py GENERATOR ORACLE EXPECTED_DIR: checks ipt_insns on hand-built archives.

The generator encodes PT for 20 bytes of hand-assembled code; expected_good.txt and
expected_bad.txt are the instruction sequences worked out by hand from that code and those packets.
"""
import pathlib
import subprocess
import sys
import tempfile


def run_oracle(oracle, archive):
    return subprocess.run([oracle, archive], capture_output=True, text=True, check=False)


def check(name, result, expected_text, expected_rc, stderr_needle):
    failures = []
    if result.stdout != expected_text:
        failures.append(f"{name}: stdout differs\n--- expected\n{expected_text}--- got\n{result.stdout}")
    if result.returncode != expected_rc:
        failures.append(f"{name}: exit status {result.returncode}, expected {expected_rc}")
    if stderr_needle not in result.stderr:
        failures.append(f"{name}: stderr lacks {stderr_needle!r}: {result.stderr!r}")
    return failures


def main():
    generator, oracle, expected_dir = sys.argv[1:4]
    expected_dir = pathlib.Path(expected_dir)
    with tempfile.TemporaryDirectory(prefix="oracle_selftest_") as work:
        subprocess.run([generator, work], check=True)
        failures = check("good.ptar", run_oracle(oracle, f"{work}/good.ptar"),
                         (expected_dir / "expected_good.txt").read_text(), 0, "")
        failures += check("bad.ptar", run_oracle(oracle, f"{work}/bad.ptar"),
                          (expected_dir / "expected_bad.txt").read_text(), 1,
                          "stream 1 (snapshot 0, tid 100): 1 decode errors, first: no memory mapped")
        missing = run_oracle(oracle, f"{work}/does-not-exist.ptar")
        if missing.returncode != 2 or "does-not-exist.ptar" not in missing.stderr:
            failures.append(f"missing archive: rc {missing.returncode}, stderr {missing.stderr!r}")
    for failure in failures:
        print(failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
