#!/usr/bin/env python3
"""Batch re-decoding: `pt-decode --jobs 2 --output-dir DIR good.ptar bad.ptar` decodes the good
archive, reports the bad one and exits non-zero; decoding the same archive again with a better
--symbols directory (the unstripped build, same build id; the stripped binary stays where it was
recorded) turns module+offset names into function names with source lines (same slice).

  debuginfod_batch_test.py PT_EMULATE PT_DECODE PROGRAM
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

NAMED = r"\] PlainC\s+\S*debuginfod_test_program\.cpp:\d+"


def main():
    emulate, pt_decode, program = sys.argv[1:4]
    work = tempfile.mkdtemp(prefix="debuginfod_batch_")
    env = dict(os.environ)
    env.pop("DEBUGINFOD_URLS", None)
    try:
        stripped = os.path.join(work, "prog")
        subprocess.run(["objcopy", "--strip-all", program, stripped], check=True)
        good = os.path.join(work, "good.ptar")
        subprocess.run([emulate, "--full", "-o", good, "--", stripped], check=True,
                       capture_output=True)
        bad = os.path.join(work, "bad.ptar")
        with open(bad, "wb") as f:
            f.write(b"this is not an archive\n")
        out1 = os.path.join(work, "out1")
        os.makedirs(out1)
        first = subprocess.run([pt_decode, "--jobs", "2", "--format", "text", "--output-dir", out1,
                                good, bad], capture_output=True, text=True, env=env)
        problems = []
        if first.returncode == 0:
            problems.append("a failed archive in the batch did not make the exit status non-zero")
        if "bad.ptar" not in first.stderr:
            problems.append(f"the failure does not name bad.ptar: {first.stderr.strip()!r}")
        good_txt = os.path.join(out1, "good.txt")
        if not os.path.exists(good_txt):
            problems.append(f"no {good_txt}: the good archive was not decoded")
            text1 = ""
        else:
            text1 = open(good_txt, encoding="utf-8").read()
            if re.search(NAMED, text1):
                problems.append("PlainC is named without symbols: the re-decode proves nothing")
            if not re.search(r"\] prog\+0x[0-9a-f]+", text1):
                problems.append("stripped code is not shown as prog+0x...")
        symbols = os.path.join(work, "symbols")
        os.makedirs(symbols)
        shutil.copy(program, os.path.join(symbols, "prog"))
        out2 = os.path.join(work, "out2")
        os.makedirs(out2)
        second = subprocess.run([pt_decode, "--jobs", "2", "--format", "text", "--output-dir",
                                 out2, "--symbols", symbols, good], capture_output=True,
                                text=True, env=env)
        if second.returncode != 0:
            problems.append(f"re-decode failed: {second.stderr.strip()}")
        else:
            text2 = open(os.path.join(out2, "good.txt"), encoding="utf-8").read()
            if not re.search(NAMED, text2):
                problems.append("re-decode with --symbols did not name PlainC with its line")
            # The same slice (same start and duration) was prog+0x... before: only the name changed.
            slice_ = re.search(r"\[(\d+ \+\d+)\] PlainC", text2)
            if slice_ and f"[{slice_.group(1)}] prog+0x" not in text1:
                problems.append(f"the PlainC slice [{slice_.group(1)}] was not prog+0x... before")
        if problems:
            print("FAIL " + "\nFAIL ".join(problems))
            return 1
        print("ok: batch exit non-zero on a bad archive; re-decode with --symbols names PlainC")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
