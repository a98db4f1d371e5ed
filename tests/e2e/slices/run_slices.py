#!/usr/bin/env python3
"""End-to-end slice tests: record a corpus program with pt-emulate, decode it with pt-decode and
check the resulting slices (issue #4's acceptance tests).

  run_slices.py --emulate E --decode D MODE [options] -- PROGRAM [ARGS...]
modes:
  tree GOLDEN          the slice tree under `main` (and other roots) matches GOLDEN
                       (syntax: slice_tree.py)
  duration FUNC        FUNC's first slice lasts exactly as many ns as the ground truth holds
                       instructions inside FUNC for that call (1 instruction = 1 ns)
  symbols DEBUG        PROGRAM is a fully stripped binary: decoded with --symbols DIR (DIR a
                       .build-id tree holding DEBUG) the names are real; without it they are
                       'PROGRAM+0x…' and the summary says how to supply symbols; a binary with
                       another build id at the recorded path is refused and reported
  damaged              truncated archives and a corrupted PT byte: no crash, a clear report
  perfetto PROTOC PROTO  the Perfetto output passes check_perfetto.py and protoc --decode
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
import slice_tree  # noqa: E402
import ptar_edit  # noqa: E402


class Failure(Exception):
    pass


def run(cmd, **kwargs):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kwargs)


def record(args, work, name='trace', extra=(), start_at_main=True):
    ptar = os.path.join(work, name + '.ptar')
    start = ['--start-at', 'main'] if start_at_main else []
    cmd = [args.emulate, '--full', *start, '-o', ptar, *extra, '--', *args.program]
    r = run(cmd)
    if r.returncode != 0:
        raise Failure(f'pt-emulate failed ({r.returncode}): {r.stderr.strip()}')
    return ptar


def decode(args, ptar, fmt='text', extra=(), expect_rc=0):
    out = ptar + '.' + fmt
    r = run([args.decode, '--format', fmt, '-o', out, *extra, ptar])
    if r.returncode < 0 or r.returncode >= 128:
        raise Failure(f'pt-decode crashed on {ptar} (status {r.returncode}): {r.stderr[-2000:]}')
    if expect_rc is not None and r.returncode != expect_rc:
        raise Failure(f'pt-decode {ptar}: exit {r.returncode}, expected {expect_rc}: {r.stderr}')
    return out, r


def mode_tree(args, work):
    text, _ = decode(args, record(args, work))
    problems = slice_tree.match_trace(args.golden, text)
    if problems:
        with open(text, encoding='utf-8') as f:
            sys.stderr.write(''.join(f.readlines()[:80]))
        raise Failure('\n'.join(problems))


def symbol_range(binary, func):
    """(offset, size) of FUNC in BINARY's symbol table (nm -S), for PIE address arithmetic."""
    r = run(['nm', '-S', '--defined-only', binary])
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3] == func:
            return int(parts[0], 16), int(parts[1], 16)
    raise Failure(f'{func} not in the symbol table of {binary}')


def mode_duration(args, work):
    truth = os.path.join(work, 'truth.txt')
    text, _ = decode(args, record(args, work, extra=['--ground-truth', truth]))
    with open(truth, encoding='utf-8') as f:
        addresses = [int(line.split()[1], 16) for line in f if line.strip()]
    # Tracing starts at main's first instruction: that fixes the PIE load bias.
    main_offset, _ = symbol_range(args.program[0], 'main')
    bias = addresses[0] - main_offset
    offset, size = symbol_range(args.program[0], args.function)
    lo, hi = bias + offset, bias + offset + size
    entry = next((i for i, a in enumerate(addresses) if a == lo), None)
    if entry is None:
        raise Failure(f'{args.function} never entered in the ground truth')
    count = 0
    while entry + count < len(addresses) and lo <= addresses[entry + count] < hi:
        count += 1
    threads, _ = slice_tree.parse_text(text)
    node = None
    for _, _, roots in threads:
        node = node or slice_tree.find_first(roots, args.function)
    if node is None:
        raise Failure(f'no {args.function} slice')
    if node.dur != count:
        raise Failure(f'{args.function}: slice lasts {node.dur} ns, ground truth has {count} '
                      f'instructions (entry at instruction {entry})')
    # The slice must also start where the ground truth enters the function (same clock origin).
    # pt-decode stamps a call's slice with the time of the call instruction itself (the branch),
    # so a callee entered after `entry` instructions of main starts entry - 1 ns after main
    # (main, entered before tracing began, starts at its first instruction).
    main_node = slice_tree.find_first(threads[0][2], 'main')
    if node.start - main_node.start != entry - 1:
        raise Failure(f'{args.function} starts {node.start - main_node.start} ns after main; '
                      f'the ground truth enters it after {entry} instructions, the call '
                      f'instruction being number {entry - 1}')
    print(f'{args.function}: {count} instructions = {node.dur} ns')


def names_in(text):
    threads, _ = slice_tree.parse_text(text)
    names = []

    def walk(nodes):
        for n in nodes:
            names.append(n.name)
            walk(n.children)
    for _, _, roots in threads:
        walk(roots)
    return names


def build_id(binary):
    r = run(['readelf', '-n', binary])
    m = re.search(r'Build ID: ([0-9a-f]+)', r.stdout)
    if not m:
        raise Failure(f'{binary} has no build id')
    return m.group(1)


def mode_no_symbols(args, ptar, copy, bid, expected):
    text, r = decode(args, ptar)
    names = names_in(text)
    base = os.path.basename(copy)
    if any(n in expected for n in names):
        raise Failure(f'without symbols the stripped binary still produced real names: {names}')
    if '[unknown]' in names:
        raise Failure('a slice is named "[unknown]" instead of module+offset')
    if not any(re.fullmatch(re.escape(base) + r'\+0x[0-9a-f]+', n) for n in names):
        raise Failure(f'no "{base}+0x…" slice without symbols: {sorted(set(names))[:20]}')
    if '--symbols' not in r.stderr or bid[:2] not in r.stderr:
        raise Failure(f'the summary does not say how to supply symbols for {base} '
                      f'(build id {bid}): {r.stderr}')


def mode_symbols(args, work):
    program = args.program[0]
    # Record a private copy so the recorded path can be replaced by a rebuilt binary later.
    copy = os.path.join(work, os.path.basename(program))
    shutil.copy2(program, copy)
    args.program = [copy] + args.program[1:]
    # A binary without a symbol table has no 'main' to start at: record the whole run.
    ptar = record(args, work, start_at_main=False)
    bid = build_id(copy)
    symdir = os.path.join(work, 'symbols')
    os.makedirs(os.path.join(symdir, '.build-id', bid[:2]))
    shutil.copy2(args.debug, os.path.join(symdir, '.build-id', bid[:2], bid[2:] + '.debug'))
    expected = ['top', 'middle_one', 'middle_two', 'leaf_a', 'leaf_b', 'leaf_c']

    if args.part == 'debugdir':
        text, _ = decode(args, ptar, extra=['--symbols', symdir])
        names = names_in(text)
        missing = [n for n in expected if n not in names]
        if missing:
            raise Failure(f'with --symbols {symdir}: no slice named {missing}')
        return

    if args.part == 'nosymbols':
        mode_no_symbols(args, ptar, copy, bid, expected)
        return
    assert args.part == 'rebuilt'

    # A rebuilt binary (same source, another build id chosen at link time) at the recorded path
    # must be refused: its addresses cannot be trusted to match the capture.
    other = os.path.join(work, 'rebuilt')
    source = os.path.join(HERE, '..', '..', 'programs', 'calls.c')
    r = run(['cc', '-g', '-O0', '-fno-omit-frame-pointer', '-pie', '-fPIE',
             '-Wl,--build-id=0x0123456789abcdef0123456789abcdef01234567', source, '-o', other])
    if r.returncode != 0:
        raise Failure(f'rebuilding {source}: {r.stderr}')
    if build_id(other) == bid:
        raise Failure('the rebuild kept the build id')
    os.replace(other, copy)
    text, r = decode(args, ptar, expect_rc=3)  # partial: the program's code is not found
    names = names_in(text)
    if any(n in expected for n in names):
        raise Failure('the rebuilt binary (other build id) was used for symbols')
    if 'status: PARTIAL (exit 3): executed code was not found' not in r.stderr:
        raise Failure(f'the rebuilt binary: the status does not say the code is missing: {r.stderr}')
    if bid not in r.stderr or 'build id' not in r.stderr.lower():
        raise Failure(f'the build-id mismatch is not reported: {r.stderr}')
    print(r.stderr)


def mode_damaged(args, work):
    ptar = record(args, work)
    with open(ptar, 'rb') as f:
        data = f.read()
    # cut -> (exit status, what the first line must say). Designed: 1 when nothing decodable
    # is left (the PT chunks of this small capture sit after the module chunks, past the
    # middle), 3 (partial) when the intact chunks before the damage hold the trace (the End
    # chunk cut).
    cuts = {0: (1, 'empty file'), 10: (1, 'truncated file header'),
            64: (1, 'damaged [0x28, 0x40)'), len(data) // 2: (1, 'damaged [0x'),
            len(data) - 3: (3, 'damaged [0x')}
    for cut, (want_rc, want_text) in cuts.items():
        path = os.path.join(work, f'cut{cut}.ptar')
        with open(path, 'wb') as f:
            f.write(data[:cut])
        _, r = decode(args, path, expect_rc=want_rc)
        if want_text not in r.stderr:
            raise Failure(f'truncated at {cut}: expected "{want_text}" in: {r.stderr}')
        message = r.stderr.strip().splitlines()[0] if r.stderr.strip() else ''
        if not message.startswith('pt-decode: ' + path):
            raise Failure(f'truncated at {cut}: no report naming the file: {r.stderr!r}')
        if not re.search(r'offset|empty|truncated|damaged|end marker', message):
            raise Failure(f'truncated at {cut}: the report says not where: {message}')
        print(f'cut at {cut}: exit {r.returncode}: {message}')
    # A byte inside the PT payload, with the chunk checksum recomputed: the damage reaches the
    # packet decoder, which must resynchronize and mark a gap.
    path = os.path.join(work, 'flipped.ptar')
    where = ptar_edit.flip_pt_byte(ptar, path, args.flip_at)
    text, r = decode(args, path, expect_rc=3)  # partial: a decode error in the trace
    if 'status: PARTIAL (exit 3): 1 decode error' not in r.stderr:
        raise Failure(f'PT byte {where} flipped: the status does not say why: {r.stderr}')
    _, instants = slice_tree.parse_text(text)
    if not instants:
        raise Failure(f'PT byte {where} flipped: no gap instant in the trace; {r.stderr}')
    if 'data loss: none' in r.stderr or 'decode_error_gaps' not in r.stderr:
        raise Failure(f'PT byte {where} flipped: the summary reports no gap: {r.stderr}')
    print(f'PT byte {where} flipped: {instants[0][2]}')


def mode_perfetto(args, work):
    trace, _ = decode(args, record(args, work), fmt='perfetto')
    checker = os.path.join(HERE, '..', '..', 'support', 'check_perfetto.py')
    r = run([sys.executable, checker, trace, '--expect-name', 'main', '--expect-name', 'leaf_c'])
    if r.returncode != 0:
        raise Failure(f'check_perfetto.py: {r.stdout}{r.stderr}')
    proto_dir = os.path.dirname(os.path.abspath(args.proto))
    with open(trace, 'rb') as f:
        r = subprocess.run([args.protoc, f'--proto_path={proto_dir}',
                            '--decode=ptscope.perfetto.Trace', os.path.basename(args.proto)],
                           stdin=f, capture_output=True, timeout=120)
    if r.returncode != 0 or b'packet' not in r.stdout:
        raise Failure(f'protoc --decode failed: {r.stderr.decode(errors="replace")}')
    print(f'protoc decoded {len(r.stdout)} bytes of text')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--emulate', required=True)
    ap.add_argument('--decode', required=True)
    ap.add_argument('mode', choices=['tree', 'duration', 'symbols', 'damaged', 'perfetto'])
    ap.add_argument('--golden')
    ap.add_argument('--function')
    ap.add_argument('--debug')
    ap.add_argument('--part', choices=['debugdir', 'nosymbols', 'rebuilt'])
    ap.add_argument('--protoc')
    ap.add_argument('--proto')
    ap.add_argument('--flip-at', type=int, default=40)
    ap.add_argument('program', nargs='+')
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix='ptscope-slices-')
    try:
        globals()['mode_' + args.mode](args, work)
    except Failure as e:
        print(f'FAIL: {e}', file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
