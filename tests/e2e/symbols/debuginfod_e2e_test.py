#!/usr/bin/env python3
"""debuginfod end to end: a stripped program is recorded with pt-emulate, then deleted; its
executable and debug info are served (1) from a file:// debuginfod tree and (2) by a real
`debuginfod` server on loopback. pt-decode --debuginfod URL must then name PlainC and
mini::Twice(int) with source lines; without a URL it must not (and never touches the network).
Also: the Fedora-style copy (stripped + .gnu_debugdata MiniDebugInfo) is named without any URL,
and with libdebuginfod.so.1 unloadable (hidden in a mount namespace) pt-decode still
decodes and names the missing library and its package.

  debuginfod_e2e_test.py PT_EMULATE PT_DECODE PROGRAM MINIDEBUGINFO_PROGRAM
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "support"))
from debuginfod_server import DebuginfodServer  # noqa: E402

WANT = [r"PlainC\s+\S*debuginfod_test_program\.cpp:\d+",
        r"mini::Twice\(int\)\s+\S*debuginfod_test_program\.cpp:\d+"]


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], check=True, capture_output=True,
                         text=True).stdout
    return re.search(r"Build ID: ([0-9a-f]+)", out).group(1)


def decode(pt_decode, archive, out, urls, cache, expect=0):
    """pt-decode's text; `expect`: its exit status (3 when the program's code is not found)."""
    env = dict(os.environ)
    env.pop("DEBUGINFOD_URLS", None)
    env["DEBUGINFOD_CACHE_PATH"] = cache
    args = [pt_decode, "--format", "text", "-o", out, archive]
    for url in urls:
        args += ["--debuginfod", url]
    result = subprocess.run(args, capture_output=True, text=True, env=env)
    if result.returncode != expect:
        raise RuntimeError(f"pt-decode exited {result.returncode} (want {expect}): "
                           f"{result.stderr.strip()}")
    return open(out, encoding="utf-8").read()


def decode_without_library(pt_decode, archive, out, url, cache):
    """pt-decode with libdebuginfod.so.1 unloadable (a mount namespace binds /dev/null over it):
    returns (exit code, stderr, output text), or None when this host cannot hide the library."""
    lines = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout.splitlines()
    library = next((line.split(" => ")[1].strip() for line in lines
                    if line.strip().startswith("libdebuginfod.so.1 ") and " => " in line), None)
    if library is None or shutil.which("unshare") is None:
        return None
    # Root gets a mount namespace; anyone else one inside a user namespace (Debian allows them).
    unshare = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-r", "-m"]
    env = dict(os.environ)
    env.pop("DEBUGINFOD_URLS", None)
    env["DEBUGINFOD_CACHE_PATH"] = cache
    script = 'lib=$1; shift; mount --bind /dev/null "$lib" || exit 125; exec "$@"'
    result = subprocess.run(unshare + ["sh", "-c", script, "sh", library, pt_decode,
                             "--format", "text", "-o", out, "--debuginfod", url, archive],
                            capture_output=True, text=True, env=env)
    if result.returncode == 125:
        return None
    text = open(out, encoding="utf-8").read() if os.path.exists(out) else ""
    return result.returncode, result.stderr, text


def missing_names(text):
    return [w for w in WANT if not re.search(w, text)]


def main():
    emulate, pt_decode, program, mini_program = sys.argv[1:5]
    work = tempfile.mkdtemp(prefix="debuginfod_e2e_")
    try:
        stripped = os.path.join(work, "prog")
        debug = os.path.join(work, "prog.debug")
        subprocess.run(["objcopy", "--only-keep-debug", program, debug], check=True)
        subprocess.run(["objcopy", "--strip-all", program, stripped], check=True)
        hex_id = build_id(stripped)
        archive = os.path.join(work, "prog.ptar")
        subprocess.run([emulate, "--full", "-o", archive, "--", stripped], check=True,
                       capture_output=True)
        # The server side keeps copies; the recorded program disappears.
        served = os.path.join(work, "served")
        os.makedirs(served)
        shutil.copy(stripped, os.path.join(served, "prog"))
        shutil.copy(debug, os.path.join(served, "prog.debug"))
        tree = os.path.join(work, "tree", "buildid", hex_id)
        os.makedirs(tree)
        shutil.copy(stripped, os.path.join(tree, "executable"))
        shutil.copy(debug, os.path.join(tree, "debuginfo"))
        os.unlink(stripped)
        os.unlink(debug)

        problems = []
        plain = decode(pt_decode, archive, os.path.join(work, "none.txt"), [],
                       os.path.join(work, "cache0"), expect=3)  # partial: the code is missing
        if not missing_names(plain):
            problems.append("names came out without any debuginfod URL: the test proves nothing")
        text = decode(pt_decode, archive, os.path.join(work, "file.txt"),
                      ["file://" + os.path.join(work, "tree")], os.path.join(work, "cache1"))
        for miss in missing_names(text):
            problems.append(f"file:// tree: no match for {miss}")

        # libdebuginfod is loaded only when a URL asks for it (dlopen): without it, the decode
        # still succeeds (partial: exit 3), unnamed, and says which package to install.
        without = decode_without_library(pt_decode, archive, os.path.join(work, "nolib.txt"),
                                         "file://" + os.path.join(work, "tree"),
                                         os.path.join(work, "cache4"))
        if without is None:
            problems.append("cannot hide libdebuginfod.so.1 here (needs ldconfig, and unshare "
                            "with mount namespaces, or user namespaces when not root)")
        else:
            code, stderr, text = without
            if code != 3:  # partial: the program's code is not found
                problems.append(f"without libdebuginfod: pt-decode exited {code} (want 3): "
                                f"{stderr.strip()}")
            if "cannot load libdebuginfod.so.1" not in stderr or "libdebuginfod1" not in stderr:
                problems.append("without libdebuginfod: no note naming the library and its "
                                f"package: {stderr.strip()[:300]}")
            if not missing_names(text):
                problems.append("without libdebuginfod: names came out anyway")

        mini = os.path.join(work, "mini")
        shutil.copy(mini_program, mini)
        mini_archive = os.path.join(work, "mini.ptar")
        subprocess.run([emulate, "--full", "-o", mini_archive, "--", mini], check=True,
                       capture_output=True)
        text = decode(pt_decode, mini_archive, os.path.join(work, "mini.txt"), [],
                      os.path.join(work, "cache3"))
        for name in ("PlainC", r"mini::Twice\(int\)"):
            if not re.search(r"\] " + name + r"(?: \(\w+\))?\s*$", text, re.M):
                problems.append(f"MiniDebugInfo: no slice named {name} (names only, no lines)")

        try:
            with DebuginfodServer(served, hex_id, artifact="debuginfo") as base:
                text = decode(pt_decode, archive, os.path.join(work, "http.txt"), [base],
                              os.path.join(work, "cache2"))
            for miss in missing_names(text):
                problems.append(f"debuginfod server: no match for {miss}")
        except RuntimeError as error:
            problems.append(str(error))
        if problems:
            print("FAIL " + "\nFAIL ".join(problems))
            return 1
        print("ok: names from a file:// tree and from a debuginfod server; none without a URL")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
