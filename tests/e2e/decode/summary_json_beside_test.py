#!/usr/bin/env python3
"""pt-decode --summary-json FILE: one decode writing its output and the JSON summary beside it,
each byte-identical to what pt-decode writes for it alone.

  summary_json_beside_test.py PT_EMULATE PT_SYNTH PT_DECODE CALLS THREADS DEEP WALKED

Captures: calls and deep_recursion (one thread each), threads on 2 virtual CPUs (per-CPU streams:
the threads are split by the context-switch sideband, another path to the stack trackers), a
pt-synth walk of 300,000 instructions over WALKED (many units). For each: perfetto, text and
folded output at --jobs 1 and 2, and perfetto with --time-range, with --summary-json, compared
with the same output alone and with `--summary --format json` alone (same jobs, same window).
The deep recursion matters: a trace folds nesting past 500 levels, a summary counts every level,
so the two outputs need their own stack trackers; its summary must count all 701 calls of
descend (descend(700) .. descend(0)) and its trace must not.
"""
import filecmp
import json
import os
import re
import subprocess
import sys
import tempfile


def run(cmd):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        sys.exit('FAIL: %s: exit %d: %s' % (' '.join(map(str, cmd)), r.returncode,
                                            r.stderr[-2000:]))
    return r


def main():
    emulate, synth, decode, calls, threads, deep, walked = sys.argv[1:8]
    failures = []
    with tempfile.TemporaryDirectory(prefix='summary-json-beside-') as work:
        captures = {}
        for name, program, extra in (('calls', calls, []), ('deep', deep, []),
                                     ('threads', threads, ['--cpus', '2'])):
            captures[name] = os.path.join(work, name + '.ptar')
            run([emulate, '--full', '--start-at', 'main', '-o', captures[name]] + extra +
                ['--', program])
        captures['walk'] = os.path.join(work, 'walk.ptar')
        run([synth, '-o', captures['walk'], '--binary', walked, '--instructions', '300000',
             '--seed', '3'])
        cases = [(fmt, jobs, []) for fmt in ('perfetto', 'text', 'folded') for jobs in ('1', '2')]
        cases.append(('perfetto', '2', ['--time-range', '1us:']))
        checked = 0
        for name, archive in captures.items():
            for fmt, jobs, window in cases:
                base = os.path.join(work, '%s-%s-%s%s' % (name, fmt, jobs, '-w' if window else ''))
                common = ['--jobs', jobs] + window
                run([decode, '--format', fmt, '-o', base + '.together', '--summary-json',
                     base + '.together.json'] + common + [archive])
                run([decode, '--format', fmt, '-o', base + '.alone'] + common + [archive])
                run([decode, '--summary', '--format', 'json', '-o', base + '.alone.json'] +
                    common + [archive])
                for a, b in (('.together', '.alone'), ('.together.json', '.alone.json')):
                    if not filecmp.cmp(base + a, base + b, shallow=False):
                        failures.append('%s %s -j%s %s: %s differs from %s' %
                                        (name, fmt, jobs, window, a, b))
                checked += 1
        # Deeper than a trace nests: the summary counts every call, the trace folds some.
        with open(os.path.join(work, 'deep-text-1.together.json')) as f:
            rows = [r for r in json.load(f)['functions'] if r['function'] == 'descend']
        if [r['calls'] for r in rows] != [701]:
            failures.append('deep: descend rows %s, want one with 701 calls' % rows)
        with open(os.path.join(work, 'deep-text-1.together')) as f:
            traced = sum(1 for line in f if re.search(r'\] descend\b', line))
        if not 0 < traced < 701:
            failures.append('deep: the text trace shows %d descend slices; a trace nests at most '
                            '500 levels, so fewer than 701' % traced)
    for failure in failures:
        print('FAIL: ' + failure)
    if failures:
        sys.exit(1)
    print('ok: %d decodes with --summary-json equal their two outputs alone' % checked)


if __name__ == '__main__':
    main()
