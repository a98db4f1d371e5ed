#!/usr/bin/env python3
"""Split DWARF end to end: split_dwarf_program.cpp is compiled with -gsplit-dwarf (the inlined
frame and the real line of OuterFunction exist only in the .dwo/.dwp), recorded with pt-emulate
and decoded with pt-decode. Every case must give exactly

  main  SRC:MAIN
    OuterFunction  SRC:OUTER
      InlinedHelper (inlined)  SRC:HELPER
    demo::Widget::Frobnicate(int)  SRC:FROBNICATE

  dwo        DWARF 5, the .dwo left where gcc wrote it (found through DW_AT_comp_dir)
  relative   DW_AT_comp_dir "." (-fdebug-prefix-map): the .dwo beside the binary, pt-decode
             started elsewhere (file names stay "./prog.cpp", as the DWARF says)
  dwp        DWARF 4, a package prog.dwp (llvm-dwp) beside the binary, the .dwo deleted
  renamed    the binary deleted; --symbols DIR holds an unstripped copy under another name and
             prog.dwp (LLVM alone would look for "copy.dwp")
  build-id   the binary deleted; --symbols DIR holds DIR/.build-id/xx/rest and prog.dwp
Control: --symbols with the renamed copy but no package loses the inlined frame (so the checks
above can fail).

  split_dwarf_test.py PT_EMULATE PT_DECODE SOURCE
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

DWP_TOOLS = ["/usr/lib/llvm-19/bin/llvm-dwp", "dwp"]


class Failure(Exception):
    pass


def run(cmd, cwd=None):
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise Failure(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
    return r


def expected_tree(source, shown=None):
    shown = shown or source
    lines = {}
    for number, text in enumerate(open(source, encoding="utf-8"), start=1):
        m = re.search(r"// (FROBNICATE|HELPER|OUTER|MAIN)$", text.rstrip())
        if m:
            lines[m.group(1)] = number
    return [f"main  {shown}:{lines['MAIN']}",
            f"  OuterFunction  {shown}:{lines['OUTER']}",
            f"    InlinedHelper (inlined)  {shown}:{lines['HELPER']}",
            f"  demo::Widget::Frobnicate(int)  {shown}:{lines['FROBNICATE']}"]


def tree_of_main(pt_decode, archive, out, extra):
    run([pt_decode, "--format", "text", "-o", out, *extra, archive])
    rows = []
    for line in open(out, encoding="utf-8"):
        m = re.match(r"^( *)\[\d+(?: \+\d+)?\] (.*)$", line.rstrip("\n"))
        if m:
            rows.append((len(m.group(1)) // 2, m.group(2)))
    starts = [i for i, (_, text) in enumerate(rows) if text.startswith("main ")]
    if len(starts) != 1:
        raise Failure(f"{len(starts)} main slices in {out}")
    depth = rows[starts[0]][0]
    tree = [rows[starts[0]][1]]
    for d, text in rows[starts[0] + 1:]:
        if d <= depth:
            break
        tree.append("  " * (d - depth) + text)
    return tree


def build_id(path):
    out = run(["readelf", "-n", path]).stdout
    return re.search(r"Build ID: ([0-9a-f]+)", out).group(1)


def main():
    emulate, pt_decode, source_in = (os.path.abspath(a) for a in sys.argv[1:4])
    work = tempfile.mkdtemp(prefix="split_dwarf_")
    try:
        failures = []

        def check(label, archive, extra, want):
            got = tree_of_main(pt_decode, archive, os.path.join(work, label + ".txt"), extra)
            if got != want:
                failures.append(f"{label}: got\n    " + "\n    ".join(got) +
                                "\n  expected\n    " + "\n    ".join(want))
            return got

        # dwo: DWARF 5 (gcc 12's default), .dwo beside the object.
        d5 = os.path.join(work, "d5")
        os.makedirs(d5)
        shutil.copy(source_in, os.path.join(d5, "prog.cpp"))
        run(["g++", "-g", "-O2", "-gsplit-dwarf", "-Wl,--build-id=sha1", "prog.cpp", "-o", "prog"],
            cwd=d5)
        if not [f for f in os.listdir(d5) if f.endswith(".dwo")]:
            raise Failure("gcc -gsplit-dwarf wrote no .dwo file")
        archive5 = os.path.join(work, "d5.ptar")
        run([emulate, "--full", "-o", archive5, "--", os.path.join(d5, "prog")])
        check("dwo", archive5, [], expected_tree(os.path.join(d5, "prog.cpp")))

        # relative: -fdebug-prefix-map makes DW_AT_comp_dir "."; pt-decode runs elsewhere, so
        # the .dwo is found only relative to the binary's directory.
        drel = os.path.join(work, "drel")
        os.makedirs(drel)
        shutil.copy(source_in, os.path.join(drel, "prog.cpp"))
        run(["g++", "-g", "-O2", "-gsplit-dwarf", f"-fdebug-prefix-map={drel}=.",
             "-Wl,--build-id=sha1", "prog.cpp", "-o", "prog"], cwd=drel)
        if os.path.exists(os.path.join(os.getcwd(), "prog.dwo")):
            raise Failure("a prog.dwo in the working directory would hide the relative lookup")
        archive_rel = os.path.join(work, "drel.ptar")
        run([emulate, "--full", "-o", archive_rel, "--", os.path.join(drel, "prog")])
        check("relative", archive_rel, [], expected_tree(os.path.join(drel, "prog.cpp"),
                                                         "./prog.cpp"))

        # dwp: DWARF 4 (the dwp tools here cannot package gcc's DWARF 5 .dwo files).
        d4 = os.path.join(work, "d4")
        os.makedirs(d4)
        shutil.copy(source_in, os.path.join(d4, "prog.cpp"))
        run(["g++", "-g", "-gdwarf-4", "-O2", "-gsplit-dwarf", "-Wl,--build-id=sha1", "prog.cpp",
             "-o", "prog"], cwd=d4)
        tool = next((t for t in DWP_TOOLS if shutil.which(t)), None)
        if tool is None:
            raise Failure(f"no DWARF packager ({', '.join(DWP_TOOLS)})")
        run([tool, "-e", "prog", "-o", "prog.dwp"], cwd=d4)
        for name in os.listdir(d4):
            if name.endswith(".dwo"):
                os.unlink(os.path.join(d4, name))
        want4 = expected_tree(os.path.join(d4, "prog.cpp"))
        archive4 = os.path.join(work, "d4.ptar")
        run([emulate, "--full", "-o", archive4, "--", os.path.join(d4, "prog")])
        check("dwp", archive4, [], want4)

        # renamed / build-id: the recorded binary and its package are gone from d4.
        renamed = os.path.join(work, "renamed")
        os.makedirs(renamed)
        shutil.copy(os.path.join(d4, "prog"), os.path.join(renamed, "copy"))
        nodwp = os.path.join(work, "nodwp")
        shutil.copytree(renamed, nodwp)
        shutil.copy(os.path.join(d4, "prog.dwp"), os.path.join(renamed, "prog.dwp"))
        hex_id = build_id(os.path.join(d4, "prog"))
        by_id = os.path.join(work, "by-id")
        os.makedirs(os.path.join(by_id, ".build-id", hex_id[:2]))
        shutil.copy(os.path.join(d4, "prog"), os.path.join(by_id, ".build-id", hex_id[:2], hex_id[2:]))
        shutil.copy(os.path.join(d4, "prog.dwp"), os.path.join(by_id, "prog.dwp"))
        os.unlink(os.path.join(d4, "prog"))
        os.unlink(os.path.join(d4, "prog.dwp"))
        check("renamed", archive4, ["--symbols", renamed], want4)
        check("build-id", archive4, ["--symbols", by_id], want4)
        control = tree_of_main(pt_decode, archive4, os.path.join(work, "control.txt"),
                               ["--symbols", nodwp])
        if any("InlinedHelper" in row for row in control):
            failures.append("control: the inlined frame appeared without any .dwo/.dwp")
        if failures:
            print("FAIL " + "\nFAIL ".join(failures))
            return 1
        print("ok: split DWARF names, lines and inlined frames from .dwo (absolute and relative "
              "comp_dir), .dwp beside the binary, a renamed copy and a .build-id copy with the "
              "package in --symbols")
        return 0
    except Failure as e:
        print(f"FAIL {e}")
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
