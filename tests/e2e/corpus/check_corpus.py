#!/usr/bin/env python3
"""check_corpus.py PROGRAM_DIR: the corpus binaries have the shape the e2e tests rely on.

The compiler decides whether a tail call is a jmp or a switch a jump table; if a compiler change
undoes that, the e2e tests would silently stop covering the case. This catches it.
"""
import re
import subprocess
import sys


def tool(*command):
    return subprocess.run(command, capture_output=True, text=True, errors="replace",
                          check=True).stdout


def function_body(binary, name):
    """objdump -d of one function (by symbol), lines after its label up to the next label."""
    lines = tool("objdump", "-d", "--no-show-raw-insn", binary).splitlines()
    body, inside = [], False
    for line in lines:
        if re.match(r"^[0-9a-f]+ <", line):
            inside = line.endswith(f"<{name}>:")
        elif inside:
            body.append(line)
    return "\n".join(body)


def main():
    d = sys.argv[1]
    failures = []

    def need(condition, what):
        if not condition:
            failures.append(what)

    need(re.search(r"\sjmp\s+[0-9a-f]+ <finish>", function_body(f"{d}/corpus-tailcall", "prepare")),
         "tailcall: prepare does not end in `jmp <finish>`")
    need(re.search(r"\sjmp\s+[0-9a-f]+ <step_two>", function_body(f"{d}/corpus-tailcall", "step_one")),
         "tailcall: step_one does not end in `jmp <step_two>`")
    need(re.search(r"\sjmp\s+\*%r", function_body(f"{d}/corpus-jumptable", "dispatch")),
         "jumptable: dispatch has no indirect jmp through a table")
    need(re.search(r"call\s+[0-9a-f]+ <recurse>", function_body(f"{d}/corpus-recursion", "recurse")),
         "recursion: recurse does not call itself")
    compute = function_body(f"{d}/corpus-inlined", "compute")
    need(compute and "call" not in compute, "inlined: compute still calls something")
    need("DW_TAG_inlined_subroutine" in tool("readelf", "--debug-dump=info", f"{d}/corpus-inlined"),
         "inlined: no DW_TAG_inlined_subroutine in the debug info")

    for name in ["calls", "recursion", "fnptr", "jumptable", "tailcall", "setjmp", "exceptions",
                 "signal", "syscalls", "threads", "dlopen", "inlined"]:
        header = tool("readelf", "-h", "-l", f"{d}/corpus-{name}")
        need("DYN (Position-Independent Executable" in header and "INTERP" in header,
             f"{name}: not a dynamically linked PIE")
    static = tool("readelf", "-h", "-l", f"{d}/corpus-static")
    need("EXEC (Executable file)" in static and "INTERP" not in static,
         "static: not a static non-PIE executable")

    for name in ["calls", "inlined"]:
        stripped = tool("readelf", "-S", "-p", ".gnu_debuglink", f"{d}/corpus-{name}-stripped")
        need(f"corpus-{name}.debug" in stripped and ".debug_info" not in stripped
             and ".symtab" in stripped, f"{name}-stripped: wrong sections or debuglink")
        nosyms = tool("readelf", "-S", f"{d}/corpus-{name}-nosyms")
        need(".gnu_debuglink" in nosyms and ".symtab" not in nosyms,
             f"{name}-nosyms: still has a symtab or lacks the debuglink")
        need(".debug_info" in tool("readelf", "-S", f"{d}/corpus-{name}.debug"),
             f"{name}.debug: no .debug_info")
        ids = {tool("readelf", "-n", f).split("Build ID:")[1].split()[0]
               for f in (f"{d}/corpus-{name}", f"{d}/corpus-{name}-nosyms", f"{d}/corpus-{name}.debug")}
        need(len(ids) == 1, f"{name}: stripped copy and debug file have different build ids {ids}")

    for failure in failures:
        print(failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
