#!/usr/bin/env python3
"""percpu_decode_test.py PT_EMULATE PT_ARCHIVE PT_DECODE WORKERS: pt-decode on per-CPU captures.

Each case records a program with `pt-emulate --cpus N --timeslice T --full --ground-truth gt`
(threads must migrate between CPUs) and checks pt-decode's own per-CPU demultiplexing:
  insns     `--format insns` equals the ground truth exactly, thread by thread
            (tests/e2e/compare_insns.py);
  summary   `--summary`: per thread, the instructions (sum of self_insns) equal the ground
            truth's count for the tid, and the calls of the program's own functions equal the
            number of times the ground truth executes the function's entry address (nm of the
            binary + the load base from the MMAP2 record of the exported perf.data);
  jobs      --jobs 1 and --jobs 2 give byte-identical Perfetto and text output, and
            `--unit-bytes 1` (one decode unit per PSB) the same summary as the default;
  order     per thread, the program's own functions are entered in the text output in the
            order the ground truth enters them (default units and --unit-bytes 1);
  per-thread  the same program recorded without --cpus and decoded to text calls the same set
            of the program's own functions in each thread (threads matched by creation order);
  perf.data both captures exported with `pt-archive export-perf` decode (read in place) to the
            same insns listing and Perfetto trace as their .ptar, at --jobs 1 and 2.
The expected values come from the ground truth and nm, never from pt-decode.
"""
import collections
import os
import pathlib
import re
import struct
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / 'support'))
sys.path.insert(0, str(HERE))
import compare_insns  # noqa: E402
from percpu_test import read_perf_data  # noqa: E402

# (program, cpus, timeslice, the program's own functions, known calls per thread in creation
# order: a sanity check of the ground-truth derivation, from the sources / tests/programs/README.md)
CASES = [
    ('workers', 2, 700, ['main', 'worker', 'add_under_lock'],
     [{'main': 1, 'worker': 1, 'add_under_lock': 100}] + [{'main': 0, 'worker': 1, 'add_under_lock': 100}] * 3),
    ('threads', 2, 1000, ['main', 'run_alpha', 'run_beta', 'run_gamma', 'work_alpha',
                          'work_beta', 'work_gamma'],
     [{'main': 1}, {'run_alpha': 1, 'work_alpha': 1}, {'run_beta': 1, 'work_beta': 1},
      {'run_gamma': 1, 'work_gamma': 1}]),
    ('signal', 2, 500, ['main', 'on_signal', 'in_handler', 'after_signal'],
     [{'main': 1, 'on_signal': 1, 'in_handler': 1, 'after_signal': 1}]),
    ('syscalls', 3, 700, ['main', 'do_write', 'do_getpid', 'do_sleep'],
     [{'main': 1, 'do_write': 1, 'do_getpid': 1, 'do_sleep': 1}]),
]

PERF_RECORD_MMAP2 = 10
ROW = re.compile(r'^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(.*?)(?: \[([^\]]*)\])?$')
THREAD = re.compile(r'^thread (\d+)/(\d+) ')
TEXT_SLICE = re.compile(r'^\s+\[\d+(?: \+\d+)?\] (\S+)')


def run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, check=False, **kw)


def load_base(perf_data, binary):
    """Start address minus file offset of the binary's first MMAP2 (PIE: nm values + base)."""
    b = pathlib.Path(perf_data).read_bytes()
    data_off, data_size = struct.unpack_from('<QQ', b, 40)
    at, end = data_off, data_off + data_size
    while at + 8 <= end:
        rtype, _misc, size = struct.unpack_from('<IHH', b, at)
        if rtype == PERF_RECORD_MMAP2:
            addr, _length, pgoff = struct.unpack_from('<QQQ', b, at + 16)
            name = b[at + 72:at + size].split(b'\0', 1)[0].decode(errors='replace')
            if os.path.realpath(name) == os.path.realpath(binary):
                return addr - pgoff
        if rtype == 71:  # AUXTRACE: its data follows the record
            at += struct.unpack_from('<Q', b, at + 8)[0]
        at += max(size, 8)
    raise ValueError(f'{perf_data}: no MMAP2 record for {binary}')


def symbols(binary, names):
    out = run(['nm', '--defined-only', binary]).stdout.decode()
    found = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in 'Tt' and f[2] in names:
            found[f[2]] = int(f[0], 16)
    missing = sorted(set(names) - set(found))
    if missing:
        raise ValueError(f'{binary}: nm finds no {missing}')
    return found


def parse_summary(text):
    """{tid: {(name, module): (calls, self_insns)}} from the per-thread tables."""
    tables, current = {}, None
    for line in text.splitlines():
        m = THREAD.match(line)
        if m:
            current = tables.setdefault(int(m.group(2)), {})
            continue
        if line.startswith('all threads') or not line.strip():
            if line.startswith('all threads'):
                current = None
            continue
        m = ROW.match(line)
        if m and current is not None:
            key = (m.group(7), m.group(8) or '')
            calls, self_insns = int(m.group(1)), int(m.group(6))
            old = current.get(key, (0, 0))
            current[key] = (old[0] + calls, old[1] + self_insns)
    return tables


def summary_rows(text):
    """{(table, function): ((calls, insns, self_insns), (total_ns, self_ns, max_ns))}: times
    apart, since a decode unit starts from its PSB's TSC where a sequential decoder interpolates
    (documented in tests/parallel/parallel_decode_test.py)."""
    rows, table = {}, ''
    for line in text.splitlines():
        m = ROW.match(line)
        if m and table:
            v = [int(m.group(i)) for i in range(1, 7)]
            rows[(table, m.group(7), m.group(8) or '')] = ((v[0], v[4], v[5]), (v[1], v[2], v[3]))
        elif line and not line.startswith(' '):
            table = line
    return rows


def parse_text_functions(text, names):
    """{tid: set of the given function names called in that thread} from --format text."""
    seen, current = {}, None
    for line in text.splitlines():
        m = THREAD.match(line)
        if m:
            current = seen.setdefault(int(m.group(2)), set())
            continue
        m = TEXT_SLICE.match(line)
        if m and current is not None and m.group(1) in names:
            current.add(m.group(1))
    return seen


def creation_order(tids, leader=None):
    """The tids of one process in creation order: the lowest tid need not be the first, since
    the kernel's tid counter wraps at pid_max (e.g. main 32700, its threads 100, 101, ...).
    `leader`: the main thread (created first); the others follow it in tid order modulo pid_max.
    Without it, the first is guessed to be the one after the largest gap between tids, which a
    busy machine can defeat (other processes taking half the tids between main and its threads)."""
    pid_max = int(pathlib.Path('/proc/sys/kernel/pid_max').read_text())
    ordered = sorted(tids)
    if leader is not None:
        return sorted(tids, key=lambda t: (t - leader) % pid_max)
    # The first created is the one after the largest gap between consecutive tids (cyclically).
    gaps = [((ordered[(i + 1) % len(ordered)] - t) % pid_max, i) for i, t in enumerate(ordered)]
    first = (max(gaps)[1] + 1) % len(ordered) if len(ordered) > 1 else 0
    return ordered[first:] + ordered[:first]


def main_thread(functions):
    """The tid whose functions include main (the process's first thread), or None."""
    return next((t for t, fns in functions.items() if 'main' in fns), None)


def parse_text_sequences(text, names):
    """{tid: the given functions' slices of that thread, in the text's (start) order}; inferred
    slices (frames found on the stack, not entered in the trace) left out."""
    seen, current = {}, None
    for line in text.splitlines():
        m = THREAD.match(line)
        if m:
            current = seen.setdefault(int(m.group(2)), [])
            continue
        m = TEXT_SLICE.match(line)
        if m and current is not None and m.group(1) in names and '(inferred)' not in line:
            current.append(m.group(1))
    return seen


def check_order(name, truth, text, prog, base, funcs):
    """Each thread's calls of the program's functions come in the ground truth's order: a
    thread's runs from several CPUs must reach its stack tracker in time order (cpu_threads.h)."""
    problems = []
    entries = {base + addr: fn for fn, addr in symbols(prog, funcs).items()}
    got = parse_text_sequences(text, funcs)
    for tid in sorted(truth):
        want = [entries[a] for a in truth[tid] if a in entries]
        have = got.get(tid, [])
        if have != want:
            at = next((i for i, (x, y) in enumerate(zip(have, want)) if x != y),
                      min(len(have), len(want)))
            problems.append(f'{name}: tid {tid}: calls out of order at call #{at}: '
                            f'{have[at:at + 3]} in the text, {want[at:at + 3]} in the ground '
                            f'truth ({len(have)} vs {len(want)} calls)')
    return problems


def decode(pt_decode, ptar, out, *args):
    r = run([pt_decode, *args, '-o', out, ptar])
    if r.returncode != 0:
        raise RuntimeError(f'pt-decode {" ".join(args)} {ptar}: exit {r.returncode}: '
                           f'{r.stderr.decode(errors="replace").strip()}')
    return pathlib.Path(out).read_bytes()


def record(tools, tmp, tag, prog, extra):
    ptar, gt = tmp / f'{tag}.ptar', tmp / f'{tag}.gt'
    r = run(['timeout', '150', tools['emulate'], *extra, '--full', '--ground-truth', gt,
             '-o', ptar, '--', prog])
    if r.returncode != 0:
        raise RuntimeError(f'{tag}: pt-emulate exit {r.returncode}: '
                           f'{r.stderr.decode(errors="replace").strip()[-400:]}')
    return ptar, gt


def check_calls(name, truth, tables, prog, base, funcs, known):
    problems = []
    entries = {base + addr: fn for fn, addr in symbols(prog, funcs).items()}
    module = os.path.basename(prog)
    # The ground truth is in execution order: its first thread is the main one.
    for index, tid in enumerate(creation_order(truth, next(iter(truth), None))):
        want = collections.Counter(entries[a] for a in truth[tid] if a in entries)
        table = tables.get(tid)
        if table is None:
            problems.append(f'{name}: tid {tid} has no table in --summary')
            continue
        total = sum(v[1] for v in table.values())
        if total != len(truth[tid]):
            problems.append(f'{name}: tid {tid}: summary has {total} instructions, the ground '
                            f'truth {len(truth[tid])}')
        for fn in funcs:
            got = table.get((fn, module), (0, 0))[0]
            if got != want[fn]:
                problems.append(f'{name}: tid {tid}: {fn} called {got} times in --summary, '
                                f'{want[fn]} in the ground truth')
        if index < len(known):  # the ground-truth derivation itself against the sources
            for fn, calls in known[index].items():
                if want[fn] != calls:
                    problems.append(f'{name}: thread #{index}: ground truth enters {fn} '
                                    f'{want[fn]} times, the program calls it {calls} times')
    if len(truth) != len(known):
        problems.append(f'{name}: {len(truth)} threads in the ground truth, want {len(known)}')
    extra = sorted(set(tables) - set(truth))
    if extra:
        problems.append(f'{name}: --summary has threads {extra} that retired nothing')
    return problems


def check_case(tools, tmp, case):
    prog_name, cpus, timeslice, funcs, known = case
    name = f'{prog_name} --cpus {cpus} --timeslice {timeslice}'
    prog = tools['workers'] if prog_name == 'workers' else os.environ.get(
        'PTSCOPE_PROG_' + prog_name.upper())
    if not prog:
        return [f'{name}: PTSCOPE_PROG_{prog_name.upper()} is not set']
    tag = f'{prog_name}-{cpus}'
    ptar, gt = record(tools, tmp, tag, prog, ['--cpus', cpus, '--timeslice', timeslice])
    problems = []
    truth = compare_insns.read_listing(gt)

    # Threads must migrate, or the per-CPU ordering is not exercised.
    perf_data = tmp / f'{tag}.data'
    r = run([tools['archive'], 'export-perf', ptar, '-o', perf_data])
    if r.returncode != 0:
        return [f'{name}: export-perf failed: {r.stderr.decode(errors="replace").strip()}']
    _aux, switches, _starts = read_perf_data(perf_data)
    cpus_of = collections.defaultdict(set)
    for s in switches:
        if not s['out'] and s['tid']:
            cpus_of[s['tid']].add(s['cpu'])
    if cpus > 1 and not any(len(c) > 1 for c in cpus_of.values()):
        problems.append(f'{name}: no thread ran on more than one CPU')

    # 1. instructions, per thread, exactly.
    decode(tools['decode'], ptar, tmp / f'{tag}.insns', '--format', 'insns')
    actual = compare_insns.read_listing(tmp / f'{tag}.insns')
    problems += [f'{name}: insns: {p}' for p in compare_insns.compare_exact(truth, actual)]

    # 2. call trees: per-thread instruction totals and call counts.
    summary = decode(tools['decode'], ptar, tmp / f'{tag}.summary', '--summary')
    tables = parse_summary(summary.decode())
    base = load_base(perf_data, prog)
    problems += check_calls(name, truth, tables, prog, base, funcs, known)

    # 3. --jobs and decode units do not change the output.
    for fmt, ext in (('perfetto', 'pftrace'), ('text', 'txt')):
        one = decode(tools['decode'], ptar, tmp / f'{tag}.j1.{ext}', '--format', fmt, '--jobs', '1')
        two = decode(tools['decode'], ptar, tmp / f'{tag}.j2.{ext}', '--format', fmt, '--jobs', '2')
        if one != two or not one:
            problems.append(f'{name}: --format {fmt}: --jobs 1 and --jobs 2 differ '
                            f'({len(one)} vs {len(two)} bytes)')
    small = decode(tools['decode'], ptar, tmp / f'{tag}.u1.summary', '--summary',
                   '--unit-bytes', '1')
    whole, split = summary_rows(summary.decode()), summary_rows(small.decode())
    counts_of = lambda rows: {k: v[0] for k, v in rows.items()}  # noqa: E731
    if not whole or counts_of(whole) != counts_of(split):
        diff = sorted(k for k in set(whole) | set(split)
                      if whole.get(k, (None,))[0] != split.get(k, (None,))[0])[:3]
        problems.append(f'{name}: --summary (calls, insns, self_insns) with --unit-bytes 1 '
                        f'differs from the default: {[(k, whole.get(k), split.get(k)) for k in diff]}')
    else:
        worst = max((abs(a - b) for k in whole for a, b in zip(whole[k][1], split[k][1])),
                    default=0)
        print(f'{name}: --unit-bytes 1: same calls and instructions; times differ by at most '
              f'{worst} ns (a unit starts from its PSB\'s TSC, see tests/parallel)')

    # 4. each thread's calls in the ground truth's order, with the default units and with one
    # unit per PSB (units, and so the order runs wait in, change; the order delivered must not).
    text = (tmp / f'{tag}.j1.txt').read_text()
    problems += check_order(name, truth, text, prog, base, funcs)
    text_u1 = decode(tools['decode'], ptar, tmp / f'{tag}.u1.txt', '--format', 'text',
                     '--unit-bytes', '1', '--jobs', '2').decode()
    problems += check_order(name + ' --unit-bytes 1', truth, text_u1, prog, base, funcs)

    # 5. the per-thread capture calls the same functions in each thread.
    ptar1, _gt1 = record(tools, tmp, f'{prog_name}-perthread', prog, [])
    text1 = decode(tools['decode'], ptar1, tmp / f'{prog_name}-perthread.txt', '--format',
                   'text').decode()
    got, want = parse_text_functions(text, funcs), parse_text_functions(text1, funcs)
    got_list = [sorted(got[t]) for t in creation_order(got, main_thread(got))]
    want_list = [sorted(want[t]) for t in creation_order(want, main_thread(want))]
    if got_list != want_list:
        problems.append(f'{name}: functions per thread (creation order) per-CPU {got_list}, '
                        f'per-thread {want_list}')
    if len(want_list) != len(known):
        problems.append(f'{name}: per-thread capture has {len(want_list)} threads, want '
                        f'{len(known)}')
    # 6. perf.data input (read in place, its trace left in the file): the same insns listing and
    # Perfetto trace as the .ptar it was exported from, per-CPU and per-thread, at -j1 and -j2.
    for source, data_file in ((ptar, perf_data), (ptar1, tmp / f'{prog_name}-perthread.data')):
        if data_file != perf_data:
            r = run([tools['archive'], 'export-perf', source, '-o', data_file])
            if r.returncode != 0:
                problems.append(f'{name}: export-perf {source.name}: '
                                f'{r.stderr.decode(errors="replace").strip()}')
                continue
        for fmt, ext in (('insns', 'insns'), ('perfetto', 'pftrace')):
            want_bytes = decode(tools['decode'], source, tmp / f'{source.stem}.src.{ext}',
                                '--format', fmt)
            for jobs in ('1', '2'):
                got_bytes = decode(tools['decode'], data_file, tmp / f'{source.stem}.data.{ext}',
                                   '--format', fmt, '--jobs', jobs)
                if got_bytes != want_bytes or not want_bytes:
                    problems.append(f'{name}: {data_file.name} --format {fmt} --jobs {jobs}: '
                                    f'{len(got_bytes)} bytes, the .ptar gives {len(want_bytes)} '
                                    f'(not the same)')

    counts = ', '.join(f'{t}: {len(v)}' for t, v in sorted(truth.items()))
    migrated = sum(1 for c in cpus_of.values() if len(c) > 1)
    print(f'{name}: instructions per thread {counts}; {migrated} thread(s) migrated; '
          f'{len(switches)} switch records; {"ok" if not problems else "FAILED"}')
    return problems


def main():
    if len(sys.argv) != 5:
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    tools = dict(zip(['emulate', 'archive', 'decode', 'workers'], sys.argv[1:]))
    problems = []
    with tempfile.TemporaryDirectory(prefix='percpu-decode-') as tmpdir:
        for case in CASES:
            try:
                problems += check_case(tools, pathlib.Path(tmpdir), case)
            except (RuntimeError, ValueError, OSError) as error:
                problems.append(f'{case[0]}: {error}')
    for p in problems:
        print('FAIL', p)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
