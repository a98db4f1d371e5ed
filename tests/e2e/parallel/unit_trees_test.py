#!/usr/bin/env python3
"""unit_trees_test.py: exact call trees where decode units cut through deep recursion.

  unit_trees_test.py --oracle CALL_TREE_ORACLE --decode PT_DECODE --emulate PT_EMULATE
                     --archive PT_ARCHIVE --program DEEP_RECURSION

deep-recursion (deep_recursion.c) runs two threads that each recurse 150 levels deep, calling
leaf() 24 times per level through a function pointer, so nearly all of each thread's PT is the
recursion. It is recorded by pt-emulate with a PSB every 256 bytes (over 100 per thread), and
decoded with one decode unit per PSB (--unit-bytes 1), so units begin and end inside the
recursion: calls still open at a unit's end, returns above the next unit's start. Captures:
  per-thread   one PT stream per thread;
  cpus-1       both threads on one virtual CPU, preempted every 2000 instructions: one stream
               whose units switch threads inside the recursion;
  cpus-2       two CPUs, preempted every 2000 instructions.
For each, at --jobs 1, 2 and 3, with one unit per PSB and with the default units (with
--stack-per-unit: at --jobs 2 and 3 per-thread units' stacks are tracked on the workers and
reconciled at the join, and pt-decode's count of reconciled units is checked):
  tree       pt-decode's text tree, projected onto the program's functions, equals the call tree
             call_tree_oracle builds from pt-emulate's ground truth alone, line for line and
             depth for depth (tests/support/call_tree.py), for every thread;
  identity   the Perfetto and text outputs are byte-identical for every --jobs.
Preconditions checked first (so that the test cannot pass without exercising what it is for):
the oracle's tree nests descend 151 levels deep in both threads; every thread's stream holds at
least 40 PSB periods of PT (per-thread capture); cpus-1's ground truth switches threads at
least 20 times.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', '..', 'support'))
import call_tree  # noqa: E402

PSB_PERIOD = 256
CAPTURES = [
    ('per-thread', []),
    ('cpus-1', ['--cpus', '1', '--timeslice', '2000']),
    ('cpus-2', ['--cpus', '2', '--timeslice', '2000']),
]


class Failure(Exception):
    pass


def run(cmd, want_stderr=False):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, timeout=600)
    if r.returncode != 0:
        raise Failure(f'{os.path.basename(str(cmd[0]))} exited with {r.returncode}: '
                      f'{r.stderr.decode(errors="replace").strip()[-2000:]}')
    return r.stderr.decode(errors='replace') if want_stderr else r.stdout.decode(errors='replace')


STACK_UNITS = re.compile(r'stack tracking per unit: (\d+) units reconciled from the workers, '
                         r'(\d+) with a wrong guess, (\d+) tracked at the join only; (\d+) '
                         r'events copied, (\d+) tracked at the join')


def max_descend_depth(oracle_text):
    """Per thread, the most descend frames open at once in the oracle's tree."""
    depths, tid, stack = {}, None, []
    for line in oracle_text.splitlines():
        if line.startswith('thread '):
            tid, stack = int(line.split()[1]), []
            depths[tid] = 0
            continue
        if tid is None or line.startswith('function '):
            continue
        name = line.lstrip(' ')
        depth = (len(line) - len(name)) // 2
        del stack[depth:]
        stack.append('descend' in name.split('|'))
        depths[tid] = max(depths[tid], sum(stack))
    return depths


def check_capture(args, work, name, extra, problems):
    ptar, truth = os.path.join(work, name + '.ptar'), os.path.join(work, name + '.gt')
    run([args.emulate, '--full', '--start-at', 'main', '--psb-period', PSB_PERIOD,
         '--ground-truth', truth, *extra, '-o', ptar, '--', args.program])
    oracle = run([args.oracle, ptar, truth, args.program])
    depths = max_descend_depth(oracle)
    if len(depths) != 2 or min(depths.values()) < 151:
        raise Failure(f'{name}: the oracle does not see two threads 151 descend frames deep: '
                      f'{depths}')
    if name == 'per-thread':
        info = run([args.archive, 'info', ptar])
        sizes = [int(b) for b in re.findall(r'^  stream \d+: .*?: (\d+) bytes', info, re.M)]
        if len(sizes) != 2 or min(sizes) < 40 * PSB_PERIOD:
            raise Failure(f'{name}: expected two streams of at least {40 * PSB_PERIOD} bytes of '
                          f'PT, found {sizes}')
    if name == 'cpus-1':
        with open(truth) as f:
            tids = [line.split(' ', 1)[0] for line in f]
        switches = sum(1 for a, b in zip(tids, tids[1:]) if a != b)
        if switches < 20:
            raise Failure(f'{name}: the ground truth switches threads {switches} times (< 20)')
    for units in (['--unit-bytes', '1'], []):
        outputs = {}
        for jobs in ('1', '2', '3'):
            for fmt, ext in (('text', 'txt'), ('perfetto', 'pftrace')):
                out = os.path.join(work, f'{name}.u{len(units)}.j{jobs}.{ext}')
                err = run([args.decode, '--format', fmt, '--jobs', jobs, '--stack-per-unit',
                           *units, '-o', out, ptar], want_stderr=True)
                # Per-thread units at --jobs > 1 have their stacks tracked on the workers: the
                # trees above are then the reconciled ones (one unit per PSB: dozens of them).
                counts = STACK_UNITS.search(err)
                least = 20 if units else 1
                if name == 'per-thread' and jobs != '1' and (
                        counts is None or int(counts.group(1)) < least):
                    problems.append(f'{name} {" ".join(units) or "default units"} --jobs {jobs}: '
                                    f'expected at least {least} units reconciled from the '
                                    f'workers, stderr says '
                                    f'{counts.group(0) if counts else "nothing about it"}')
                with open(out, 'rb') as f:
                    outputs[(jobs, ext)] = f.read()
            what = f'{name} {" ".join(units) or "default units"} --jobs {jobs}'
            for problem in call_tree.compare(oracle, os.path.join(work, f'{name}.u{len(units)}'
                                                                        f'.j{jobs}.txt')):
                problems.append(f'{what}: {problem}')
        for ext in ('txt', 'pftrace'):
            for jobs in ('2', '3'):
                if outputs[(jobs, ext)] != outputs[('1', ext)]:
                    problems.append(f'{name} {" ".join(units) or "default units"}: {ext} at '
                                    f'--jobs {jobs} differs from --jobs 1')


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag in ('--oracle', '--decode', '--emulate', '--archive', '--program'):
        parser.add_argument(flag, required=True)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix='unit_trees_')
    problems = []
    for name, extra in CAPTURES:
        try:
            check_capture(args, work, name, extra, problems)
        except (Failure, OSError, ValueError, subprocess.TimeoutExpired) as error:
            problems.append(str(error))
    for problem in problems:
        print(f'FAIL {problem}')
    if problems:
        print(f'inputs kept in {work}')
        return 1
    print(f'{len(CAPTURES)} captures: trees as the oracle and identical for --jobs 1, 2, 3')
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
