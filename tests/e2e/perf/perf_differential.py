#!/usr/bin/env python3
"""perf_differential.py PT_EMULATE PT_ARCHIVE [PROGRAM...]: the perf oracle test.

Each corpus program (PTSCOPE_PROG_<NAME> from the corpus environment) is run under
`pt-emulate --full --ground-truth gt.txt`, the archive is exported with `pt-archive export-perf`,
and Linux perf's own Intel PT decoder (`perf script --itrace=i1i -F tid,ip`) must reproduce the
ground truth exactly, thread by thread (`TID 0xADDRESS` lines, in order).
Fails (with a message) when perf is missing: it is a prerequisite, not an option.
"""
import collections
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

# One program per control-flow feature keeps the run near a minute (pt-emulate single-steps at
# ~10k instructions/s here); pass names to run others (calls, fnptr, tailcall, syscalls, inlined
# and dlopen also matched perf exactly when this list was chosen).
DEFAULT_PROGRAMS = ['recursion', 'jumptable', 'setjmp', 'exceptions', 'signal', 'threads', 'static']


def run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=False, **kw)


def per_thread(lines):
    threads = collections.OrderedDict()
    for line in lines:
        f = line.split()
        if len(f) == 2:
            threads.setdefault(int(f[0]), []).append(int(f[1], 16))
    return threads


def perf_threads(data):
    r = run(['perf', 'script', '-i', data, '--itrace=i1i', '-F', 'tid,ip'])
    return r, per_thread(r.stdout.splitlines())


def compare(name, truth, got):
    problems = []
    for tid in sorted(set(truth) | set(got)):
        want, have = truth.get(tid, []), got.get(tid, [])
        if want == have:
            continue
        i = next((k for k, (a, b) in enumerate(zip(want, have)) if a != b), min(len(want), len(have)))
        problems.append(f'{name}: tid {tid}: ground truth {len(want)} instructions, perf {len(have)}; '
                        f'first difference at #{i}: truth {hex(want[i]) if i < len(want) else "end"}, '
                        f'perf {hex(have[i]) if i < len(have) else "end"}')
    return problems


def check_snapshot(pt_emulate, pt_archive, work):
    """Snapshot mode (SNAPSHOT_MODE=1, a 4 KiB ring): perf must decode the end of the run, i.e.
    a non-empty suffix of the ground truth, per thread."""
    gt, ptar, data = work / 'snap.gt', work / 'snap.ptar', work / 'snap.data'
    prog = os.environ['PTSCOPE_PROG_CALLS']
    r = run([pt_emulate, '--snapshot-size', '4096', '--ground-truth', gt, '-o', ptar, '--', prog])
    if r.returncode != 0:
        return [f'snapshot: pt-emulate rc {r.returncode}: {r.stderr.strip()[:300]}']
    r = run([pt_archive, 'export-perf', ptar, '-o', data])
    if r.returncode != 0:
        return [f'snapshot: export-perf: {r.stderr.strip()}']
    truth, (result, got) = per_thread(gt.read_text().splitlines()), perf_threads(data)
    problems = []
    for tid, want in truth.items():
        have = got.get(tid, [])
        if not have or len(have) >= len(want) or want[-len(have):] != have:
            problems.append(f'snapshot: tid {tid}: perf decoded {len(have)} instructions, not a '
                            f'proper suffix of the {len(want)}-instruction ground truth')
    print(f'snapshot (calls, 4 KiB ring): perf decoded {sum(map(len, got.values()))} instructions: '
          f'{"MISMATCH" if problems else "a suffix of the ground truth"}')
    return problems


def main():
    pt_emulate, pt_archive = sys.argv[1:3]
    programs = sys.argv[3:] or DEFAULT_PROGRAMS
    if shutil.which('perf') is None:
        print('FAIL: perf is not installed: this test checks against Linux perf\'s own decoder; '
              'scripts/setup installs it (Debian package linux-perf)', file=sys.stderr)
        return 1
    failures, checked = [], 0
    with tempfile.TemporaryDirectory(prefix='perf_diff_') as tmp:
        work = pathlib.Path(tmp)
        for name in programs:
            prog = os.environ.get('PTSCOPE_PROG_' + name.upper())
            if not prog:
                failures.append(f'{name}: PTSCOPE_PROG_{name.upper()} is not set')
                continue
            args = [os.environ['PTSCOPE_PLUGIN']] if name == 'dlopen' else []
            gt, ptar, data = work / f'{name}.gt', work / f'{name}.ptar', work / f'{name}.data'
            r = run([pt_emulate, '--full', '--ground-truth', gt, '-o', ptar, '--', prog] + args)
            if r.returncode != 0 or not gt.exists():
                failures.append(f'{name}: pt-emulate rc {r.returncode}: {r.stderr.strip()[:300]}')
                continue
            r = run([pt_archive, 'export-perf', ptar, '-o', data])
            if r.returncode != 0:
                failures.append(f'{name}: export-perf: {r.stderr.strip()}')
                continue
            result, got = perf_threads(data)
            if result.returncode != 0:
                failures.append(f'{name}: perf script rc {result.returncode}: {result.stderr.strip()[:300]}')
                continue
            truth = per_thread(gt.read_text().splitlines())
            problems = compare(name, truth, got)
            failures += problems
            checked += 1
            total = sum(len(v) for v in truth.values())
            print(f'{name}: {len(truth)} threads, {total} instructions: '
                  f'{"MISMATCH" if problems else "perf == ground truth"}')
        if checked:
            failures += check_snapshot(pt_emulate, pt_archive, work)
    for f in failures:
        print('FAIL: ' + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
