#!/usr/bin/env python3
"""percpu_decode.py: pt-decode lists a per-CPU trace's instructions under the right thread.

Usage: percpu_decode.py PT_DECODE PT_ARCHIVE KNOWN_LOOP MAKE_KNOWN_ARCHIVE SRCDIR

Two per-CPU captures of known_loop, whose instruction sequence is fixed by construction
(known_loop.expected): make_known_archive --per-cpu (libipt-encoded, CPU 1, one
SWITCH_CPU_WIDE switch-out from idle naming tid 4243) and make_perf_data.py --per-cpu imported
with pt-archive (hand-encoded, perf-record shaped, tid 4242). Only the switch sideband says which
thread ran, so `pt-decode --format insns` must print exactly the expected lines with that tid.
"""
import pathlib
import subprocess
import sys
import tempfile

from perf_e2e import expected_lines


def run(cmd):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=False)


def main():
    pt_decode, pt_archive, known_loop, make_known, srcdir = sys.argv[1:6]
    srcdir = pathlib.Path(srcdir)
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        known = work / 'known-cpu.ptar'
        subprocess.run([make_known, known_loop, str(known), '--per-cpu'], check=True)
        data, imported = work / 'py-cpu.data', work / 'py-cpu.ptar'
        subprocess.run([sys.executable, str(srcdir / 'make_perf_data.py'), '--binary', known_loop,
                        '--out', str(data), '--per-cpu'], check=True)
        r = run([pt_archive, 'import-perf', data, '-o', imported])
        if r.returncode != 0:
            failures.append(f'import-perf {data}: {r.stderr.strip()}')
        for ptar, tid in ((known, 4243), (imported, 4242)):
            if not ptar.exists():
                continue
            r = run([pt_decode, ptar, '--format', 'insns', '-o', '-'])
            got = r.stdout.splitlines()
            want = expected_lines(known_loop, srcdir, tid)
            if r.returncode != 0 or got != want:
                failures.append(f'pt-decode --format insns {ptar.name}: rc {r.returncode}, '
                                f'{len(got)} lines, want {len(want)}\n  got:  {got[:8]}\n'
                                f'  want: {want[:8]}\n  stderr: {r.stderr.strip()[:300]}')
    for failure in failures:
        print('FAIL: ' + failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
