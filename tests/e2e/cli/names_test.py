#!/usr/bin/env python3
"""Names people can trust (issue #27), end to end on a stripped program (names_program.c).

  stripped  tracing starts inside api_work (--start-at), so outer is a caller inferred from
            returns: every unnamed function is named PROGRAM+OFFSET of its entry (nm's address of
            outer/inner in the unstripped build), wherever the trace meets it;
            "symbolized code" is the exact share of instructions in named functions (the ground
            truth's instructions inside api_work, the only function with a symbol left)
  gaps      names_lib.so is hidden after recording: the summary names it as missing, says how
            much of the traced time lies in gaps (decoded instructions + time in gaps = the span,
            on pt-emulate's one-instruction-per-ns clock) and that the trace ends in one; recorded
            without calling into it, the same library is not missing and there are no gaps
  refused   a rebuilt program in --symbols is refused with a note naming it and both build ids

  names_test.py PART PT_EMULATE PT_DECODE PROGRAM PROGRAM_V2 LIBRARY
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile


class Failure(Exception):
    pass


def run(cmd, env=None, expect_rc=0):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if expect_rc is not None and r.returncode != expect_rc:
        raise Failure(f'{" ".join(cmd)} exited {r.returncode} (expected {expect_rc}):\n'
                      f'{r.stdout}{r.stderr}')
    return r


def build_id(path):
    m = re.search(r'Build ID: ([0-9a-f]+)', run(['readelf', '-n', path]).stdout)
    if not m:
        raise Failure(f'no build id in {path}')
    return m.group(1)


def nm_functions(path):
    """name -> (vaddr, size) of the function symbols nm lists with sizes."""
    out = {}
    for line in run(['nm', '-S', path]).stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in 'tTwW':
            out[parts[3]] = (int(parts[0], 16), int(parts[1], 16))
    return out


def vaddr_to_offset(path, vaddr):
    """File offset of `vaddr` through the PT_LOAD that maps it (readelf is the oracle)."""
    for line in run(['readelf', '-lW', path]).stdout.splitlines():
        parts = line.split()
        if parts and parts[0] == 'LOAD':
            offset, start, filesz = int(parts[1], 16), int(parts[2], 16), int(parts[4], 16)
            if start <= vaddr < start + filesz:
                return vaddr - start + offset
    raise Failure(f'{vaddr:#x} is in no PT_LOAD of {path}')


def stage(work, program, library):
    """A stripped copy of the program, and the library in a directory of its own."""
    stripped = os.path.join(work, 'names_program')
    run(['strip', '-o', stripped, program])
    libdir = os.path.join(work, 'lib')
    os.makedirs(libdir)
    shutil.copy(library, libdir)
    env = dict(os.environ, LD_LIBRARY_PATH=libdir)
    return stripped, os.path.join(libdir, os.path.basename(library)), env


def record(emulate, work, name, stripped, env, args, extra):
    archive = os.path.join(work, name + '.ptar')
    truth = os.path.join(work, name + '.truth')
    run([emulate, '--full', '--start-at', 'api_work', '--ground-truth', truth, *extra,
         '-o', archive, '--', stripped, *args], env=env)
    with open(truth) as f:
        addresses = [int(line.split()[1], 16) for line in f if line.strip()]
    return archive, addresses


def decode(decode_tool, archive, work, extra=(), expect_rc=0):
    text = os.path.join(work, 'out.txt')
    r = run([decode_tool, '--format', 'text', '-o', text, *extra, archive], expect_rc=expect_rc)
    with open(text) as f:
        return f.read(), r.stderr.splitlines()


def part_stripped(emulate, decode_tool, program, work, library):
    stripped, _, env = stage(work, program, library)
    archive, truth = record(emulate, work, 'stripped', stripped, env, [],
                            ['--max-instructions', '5000'])
    text, summary = decode(decode_tool, archive, work)
    functions = nm_functions(program)
    entries = {vaddr_to_offset(program, functions[f][0]): f for f in ('main', 'outer', 'inner')}
    used = {int(m, 16) for m in re.findall(r'\] names_program\+0x([0-9a-f]+)', text)}
    # main is not reached before the trace ends: outer and inner are seen, by their entries only.
    if not used <= set(entries) or not {'outer', 'inner'} <= {entries[o] for o in used}:
        names = {f'{o:#x}': entries.get(o, '?') for o in sorted(used)}
        raise Failure(f'unnamed functions were named {names}; their entries are '
                      f'{ {f: hex(o) for o, f in entries.items()} }')
    outer = next(o for o, f in entries.items() if f == 'outer')
    if not re.search(r'^ +\[\d+ \+\d+\] names_program\+0x%x \(inferred\)$' % outer, text, re.M):
        raise Failure(f'outer is not an inferred caller named by its entry:\n{text[:600]}')
    # The share of instructions in named functions: those inside api_work, whose entry is where
    # tracing started.
    start, size = functions['api_work']
    base = truth[0] - start
    named = sum(1 for a in truth if base + start <= a < base + start + size)
    want = (f'  symbolized code: {100.0 * named / len(truth):.1f}% of decoded instructions ran in '
            'named functions')
    if want not in summary or f'{len(truth):,} instructions' not in summary[0]:
        raise Failure(f'expected {want!r} and {len(truth)} instructions in:\n' + '\n'.join(summary))
    if named in (0, len(truth)):
        raise Failure(f'{named} of {len(truth)} instructions in api_work: the check is void')


def nanoseconds(text):
    """pt-decode's duration ("9794 ns", "15.825 us", "1.500 ms") in nanoseconds."""
    value, unit = text.split()
    return round(float(value) * {'ns': 1, 'us': 1e3, 'ms': 1e6, 's': 1e9}[unit])


def part_gaps(emulate, decode_tool, program, work, library):
    stripped, lib, env = stage(work, program, library)
    lib_id = build_id(lib)
    calls, truth = record(emulate, work, 'calls', stripped, env, ['hello'],
                          ['--psb-period', '256'])
    # Stopped inside outer's loop: not even the library's destructors run.
    quiet, _ = record(emulate, work, 'quiet', stripped, env, [], ['--max-instructions', '3000'])
    os.unlink(lib)
    # Code that ran is missing: written, but partial (exit 3).
    text, summary = decode(decode_tool, calls, work, expect_rc=3)
    m = re.match(r'pt-decode: .*: 1 thread, ([\d,]+) instructions over (.*)$', summary[0])
    if not m:
        raise Failure(f'bad first summary line: {summary[0]!r}')
    decoded, span_ns = int(m.group(1).replace(',', '')), nanoseconds(m.group(2))
    m = re.search(r"^    missing_code_gaps: (\d+) \(.*\n  time in gaps: (\d+) ns of the threads' (.*) "
                  r"\((\d+\.\d)%\), their instructions unknown; 1 thread's trace ends in a gap of "
                  r"unknown length$", '\n'.join(summary), re.M)
    if not m:
        raise Failure('unexpected data loss / time in gaps lines:\n' + '\n'.join(summary))
    gap_count, gap_ns = int(m.group(1)), int(m.group(2))
    if nanoseconds(m.group(3)) != span_ns:
        raise Failure(f'traced time {m.group(3)} differs from the span {span_ns} ns')
    if text.count('! [gap] missing code') != gap_count:
        raise Failure(f'{gap_count} gaps counted, the text shows another number')
    # pt-emulate's clock ticks once per instruction: the traced time is the decoded instructions
    # plus those in gaps, up to the few a gap's time leaves on either side of it.
    if abs(decoded + gap_ns - span_ns) > 8 * gap_count or gap_ns == 0:
        raise Failure(f'{decoded} decoded instructions + {gap_ns} ns in gaps, but the trace spans '
                      f'{span_ns} ns')
    if span_ns >= len(truth):
        raise Failure(f'the trace ends in a gap, yet spans {span_ns} ns of {len(truth)} run')
    want = (f'  missing module: {lib} (build id {lib_id}): its code was not found; pass --symbols '
            f'DIR with a directory holding that exact build (or DIR/.build-id/{lib_id[:2]}/'
            f'{lib_id[2:]})')
    if [line for line in summary if line.startswith('  missing module:')] != [want]:
        raise Failure(f'expected {want!r} in:\n' + '\n'.join(summary))
    # Mapped but never run in the trace: not missing, no gaps.
    _, summary = decode(decode_tool, quiet, work)
    if '  data loss: none' not in summary or any('missing module' in line or 'time in gaps' in line
                                                   for line in summary):
        raise Failure('a library none of whose code ran is reported:\n' + '\n'.join(summary))


def part_refused(emulate, decode_tool, program, program_v2, work, library):
    stripped, _, env = stage(work, program, library)
    archive, _ = record(emulate, work, 'refused', stripped, env, [], ['--max-instructions', '500'])
    syms = os.path.join(work, 'syms')
    os.makedirs(syms)
    shutil.copy(program_v2, os.path.join(syms, 'names_program'))
    _, summary = decode(decode_tool, archive, work, ['--symbols', syms])
    want = (f'  note: refused {syms}/names_program: build id {build_id(program_v2)}, but the '
            f"capture's {stripped} has build id {build_id(stripped)} (another build: its "
            'addresses do not match)')
    if want not in summary:
        raise Failure(f'expected {want!r} in:\n' + '\n'.join(summary))


def main():
    part = sys.argv[1]
    emulate, decode_tool, program, program_v2, library = (os.path.abspath(a) for a in sys.argv[2:7])
    with tempfile.TemporaryDirectory(prefix='names_test_') as work:
        try:
            if part == 'stripped':
                part_stripped(emulate, decode_tool, program, work, library)
            elif part == 'gaps':
                part_gaps(emulate, decode_tool, program, work, library)
            elif part == 'refused':
                part_refused(emulate, decode_tool, program, program_v2, work, library)
            else:
                raise Failure(f'unknown part {part}')
        except Failure as e:
            print(f'FAIL {part}: {e}')
            return 1
    print(f'PASS names {part}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
