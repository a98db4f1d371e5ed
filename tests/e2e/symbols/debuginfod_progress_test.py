#!/usr/bin/env python3
"""debuginfod batch and progress: three different stripped programs (three build ids) are
recorded with pt-emulate and deleted; a local `debuginfod` server holds their stripped
executables and debug files. Then

  pipe      `pt-decode --jobs 3 --output-dir OUT --debuginfod URL a.ptar b.ptar c.ptar` with stderr
            on a pipe names PlainC and mini::Twice(int) with source lines in all three outputs,
            and stderr carries no progress line;
  terminal  the same run (empty cache) with stderr on a pseudo-terminal shows, per download, one
            updating line "\\rdebuginfod: prog_X executable|debuginfo: ..." closed by ", done"
            and a newline: six downloads, each named by its module.

  debuginfod_progress_test.py PT_EMULATE PT_DECODE PROGRAM PROGRAM_V2 PROGRAM_V3
"""
import os
import pty
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "support"))
from debuginfod_server import DebuginfodServer  # noqa: E402

NAMED = [r"\] PlainC\s+\S*debuginfod_test_program\.cpp:\d+",
         r"\] mini::Twice\(int\)\s+\S*debuginfod_test_program\.cpp:\d+"]
NAMES = ["prog_a", "prog_b", "prog_c"]


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], check=True, capture_output=True,
                         text=True).stdout
    return re.search(r"Build ID: ([0-9a-f]+)", out).group(1)


def run_on_pty(args, env):
    """Runs args with stderr on a pseudo-terminal; returns (exit status, stderr bytes)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed its side
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(), b"".join(chunks)


def check_outputs(out_dir, problems, label):
    for name in NAMES:
        path = os.path.join(out_dir, name + ".txt")
        if not os.path.exists(path):
            problems.append(f"{label}: no {path}")
            continue
        text = open(path, encoding="utf-8").read()
        for want in NAMED:
            if not re.search(want, text):
                problems.append(f"{label}: {name}.txt has no match for {want}")


def main():
    emulate, pt_decode = sys.argv[1:3]
    programs = sys.argv[3:6]
    server = None
    work = tempfile.mkdtemp(prefix="debuginfod_progress_")
    try:
        serve_dir = os.path.join(work, "served")
        os.makedirs(serve_dir)
        archives, ids = [], []
        for name, program in zip(NAMES, programs):
            stripped = os.path.join(work, name)
            subprocess.run(["objcopy", "--only-keep-debug", program,
                            os.path.join(serve_dir, name + ".debug")], check=True)
            subprocess.run(["objcopy", "--strip-all", program, stripped], check=True)
            shutil.copy(stripped, os.path.join(serve_dir, name))
            ids.append(build_id(stripped))
            archive = os.path.join(work, name + ".ptar")
            subprocess.run([emulate, "--full", "-o", archive, "--", stripped], check=True,
                           capture_output=True)
            os.unlink(stripped)
            archives.append(archive)
        if len(set(ids)) != 3:
            print(f"FAIL the three programs share build ids: {ids}")
            return 1

        server = DebuginfodServer(serve_dir, ids, artifact="debuginfo")
        try:
            base = server.__enter__()
        except RuntimeError as error:
            print(f"FAIL {error}")
            return 1
        problems = []
        env = dict(os.environ)
        env.pop("DEBUGINFOD_URLS", None)
        env["DEBUGINFOD_CACHE_PATH"] = os.path.join(work, "cache-pipe")
        out_pipe = os.path.join(work, "out-pipe")
        os.makedirs(out_pipe)
        args = [pt_decode, "--jobs", "3", "--format", "text", "--debuginfod", base]
        pipe = subprocess.run(args + ["--output-dir", out_pipe] + archives, capture_output=True,
                              text=True, env=env)
        if pipe.returncode != 0:
            problems.append(f"pipe: pt-decode exited {pipe.returncode}: {pipe.stderr.strip()}")
        check_outputs(out_pipe, problems, "pipe")
        if "debuginfod:" in pipe.stderr or "\r" in pipe.stderr:
            problems.append(f"pipe: progress text on a non-terminal stderr: {pipe.stderr!r}")

        env["DEBUGINFOD_CACHE_PATH"] = os.path.join(work, "cache-tty")
        out_tty = os.path.join(work, "out-tty")
        os.makedirs(out_tty)
        status, err = run_on_pty(args + ["--output-dir", out_tty] + archives, env)
        text = err.decode("utf-8", "replace").replace("\r\n", "\n")  # the pty adds CR before LF
        if status != 0:
            problems.append(f"terminal: pt-decode exited {status}: {text.strip()}")
        check_outputs(out_tty, problems, "terminal")
        for name in NAMES:
            for artifact in ("executable", "debuginfo"):
                done = re.findall(rf"\rdebuginfod: {name} {artifact}: [0-9.]+(?: of [0-9.]+)? MiB,"
                                  r" done\x1b\[K\n", text)
                if len(done) != 1:
                    problems.append(f"terminal: {len(done)} finished progress lines for {name} "
                                    f"{artifact}, expected 1")
        if problems:
            print("FAIL " + "\nFAIL ".join(problems))
            print(f"terminal stderr: {text!r}")
            return 1
        print("ok: 3 archives decoded named with --jobs 3 through debuginfod; one progress line "
              "per download on a terminal, none on a pipe")
        return 0
    finally:
        if server is not None:
            server.__exit__(None, None, None)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
