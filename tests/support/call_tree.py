#!/usr/bin/env python3
"""The call-tree oracle test: what users see (pt-decode --format text, default options: the
QueryWalker, the flow decoder in parallel units, the stack tracker, the names) against the call
tree call_tree_oracle builds from the ground truth alone.

  call_tree.py --oracle CALL_TREE_ORACLE --decode PT_DECODE
               (--emulate PT_EMULATE | --synth PT_SYNTH --seed N --instructions N)
               [--jobs N] -- PROGRAM [ARGS...]   (--jobs: pt-decode's; default: its own)

pt-emulate records PROGRAM from main (or pt-synth walks PROGRAM's code), writing the ground truth;
pt-decode's text tree is projected onto PROGRAM's named functions exactly as the oracle's is
(slices of other code, [syscall]/[untraced] and inlined frames are left out, their children lifted;
'(inferred)' is not compared), and the two must be equal line for line, thread by thread.
The work directory is removed on success and kept (and named) on failure.

--synth (tests/e2e/synth: calltree_synth_*) also asks pt-synth for its TIP.PGDs (--untraced-exits)
and gives them to the oracle: the ground truth lists traced instructions only, so a return into
untraced code followed by tracing resuming at another function's entry looks there like a return
to that entry. The model both follow (call_tree_oracle.cpp, "A pt-synth walk leaves..."): the
branch that left does what the trace says it did (a return goes to the TIP.PGD's address: to an
open frame's return address, or revealing a caller, or re-anchoring); code where tracing resumes
is called by the untraced code, nested under what was running, whose frames stay open.

corpus-static (calltree_synth_static_*) checks conditional jumps into another function's body
too (glibc's __mempcpy_erms `je __memcpy_erms+0x1d`, __strcasecmp_avx2_rtm ->
__strcasecmp_l_nonascii): both replace the top frame there, as for an unconditional jump to another
function (DESIGN.md's jump rule; magic-trace does the same for any jcc to another symbol). The flow
decoder makes a kJump of a taken conditional branch whose target leaves its function.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slice_tree  # noqa: E402


class Failure(Exception):
    pass


def run(cmd, output='stdout'):
    """cmd's stdout (output='stderr': its stderr, where pt-synth prints its summary)."""
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise Failure(f'{os.path.basename(cmd[0])} exited with {r.returncode}: '
                      f'{r.stderr.strip()[-2000:]}')
    return getattr(r, output)


def check_switched(summary, threads):
    """pt-synth --cpus must have moved threads between CPUs, or the per-CPU case is not tested."""
    for line in summary.splitlines():
        if 'switch-ins' in line:
            switch_ins = int(line.split(', ')[-1].split()[0])
            if switch_ins <= threads:
                raise Failure(f'pt-synth switched threads in only {switch_ins} times for {threads} '
                              f'threads: {line}')
            return
    raise Failure(f'pt-synth printed no switch-ins line: {summary.strip()[-500:]}')


def read_oracle(text):
    """(alias groups by name, {tid: [(depth, group)]}) from call_tree_oracle's output."""
    group_of, threads, tid = {}, {}, None
    for line in text.splitlines():
        if line.startswith('function '):
            group = frozenset(line[len('function '):].split('|'))
            for name in group:
                group_of.setdefault(name, set()).add(group)
        elif line.startswith('thread '):
            tid = int(line.split()[1])
            threads.setdefault(tid, [])
        else:
            name = line.lstrip(' ')
            threads[tid].append(((len(line) - len(name)) // 2, frozenset(name.split('|'))))
    return group_of, threads


def project(nodes, keep, depth, out):
    for node in nodes:
        if node.name in keep and 'inlined' not in node.flags:
            out.append((depth, node.name))
            project(node.children, keep, depth + 1, out)
        else:
            project(node.children, keep, depth, out)


def compare(oracle_text, decoded_path):
    group_of, want = read_oracle(oracle_text)
    threads, _instants = slice_tree.parse_text(decoded_path)
    have = {}
    for tid, _pid, roots in threads:
        project(roots, group_of, 0, have.setdefault(tid, []))
    problems = []
    for tid in sorted(set(want) | set(have)):
        w, h = want.get(tid, []), have.get(tid, [])
        if not w and not h:
            continue
        for i in range(max(len(w), len(h))):
            if i < len(w) and i < len(h) and w[i][0] == h[i][0] and h[i][1] in w[i][1]:
                continue
            show = lambda rows: ' / '.join(  # noqa: E731
                f'{d}:{n if isinstance(n, str) else "|".join(sorted(n))}'
                for d, n in rows[max(0, i - 3):i + 3])
            problems.append(f'thread {tid}: line {i + 1} of {len(w)} (depth:name) differs\n'
                            f'  oracle:    {show(w)}\n  pt-decode: {show(h)}')
            break
        else:
            print(f'thread {tid}: {len(w)} calls of the program\'s functions, as the oracle')
    if not any(want.values()):
        problems.append('the oracle found no call of the program\'s functions (nothing compared)')
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--oracle', required=True)
    parser.add_argument('--decode', required=True)
    parser.add_argument('--emulate')
    parser.add_argument('--synth')
    parser.add_argument('--seed', default='1')
    parser.add_argument('--instructions', default='200000')
    parser.add_argument('--threads', help='pt-synth --threads')
    parser.add_argument('--cpus', help='pt-synth --cpus (per-CPU streams; the test also checks '
                        'that threads were switched: more switch-ins than threads)')
    parser.add_argument('--timeslice', help='pt-synth --timeslice')
    parser.add_argument('--jobs')
    parser.add_argument('program', nargs='+')
    args = parser.parse_args()
    if bool(args.emulate) == bool(args.synth):
        parser.error('one of --emulate and --synth')
    work = tempfile.mkdtemp(prefix=f'calltree_{os.path.basename(args.program[0])}_')
    ptar, truth, text, exits = (os.path.join(work, n)
                                for n in ('x.ptar', 'gt.txt', 'x.txt', 'exits.txt'))
    try:
        if args.emulate:
            run([args.emulate, '--full', '--start-at', 'main', '--ground-truth', truth, '-o',
                 ptar, '--', *args.program])
        else:
            extra = [a for flag, value in (('--threads', args.threads), ('--cpus', args.cpus),
                                           ('--timeslice', args.timeslice)) if value
                     for a in (flag, value)]
            made = run([args.synth, '--binary', args.program[0], '--seed', args.seed,
                        '--instructions', args.instructions, '--ground-truth', truth,
                        '--untraced-exits', exits, '-o', ptar, *extra], output='stderr')
            if args.cpus:
                check_switched(made, int(args.threads or 1))
        oracle = run([args.oracle, ptar, truth, args.program[0]] +
                     ([exits] if args.synth else []))
        jobs = ['--jobs', args.jobs] if args.jobs else []
        run([args.decode, '--format', 'text', *jobs, '-o', text, ptar])
        problems = compare(oracle, text)
    except (Failure, OSError, ValueError, subprocess.TimeoutExpired) as error:
        problems = [str(error)]
    for problem in problems:
        print(f'FAIL {problem}')
    if problems:
        print(f'inputs kept in {work}')
        return 1
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
