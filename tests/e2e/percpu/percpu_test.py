#!/usr/bin/env python3
"""percpu_test.py PT_EMULATE PT_ARCHIVE WORKERS UFFD: per-CPU captures of pt-emulate --cpus (issue #6).

For each case (a corpus program, a CPU count, a timeslice) the program runs under
`pt-emulate --cpus N --timeslice T --full --ground-truth gt.txt`, the archive is exported with
`pt-archive export-perf`, and:
  structure  the perf.data (parsed here, not by perf) holds per-CPU AUXTRACE streams on every
             virtual CPU, and the SWITCH_CPU_WIDE records are consistent (see check_switches);
  oracle     Linux perf demultiplexes the per-CPU streams with that sideband by itself
             (`perf script --itrace=i1i -F tid,ip`) and its per-thread instruction sequences
             equal the ground truth exactly.
A last case checks that a capture without --cpus stays per-thread (no per-cpu feature, no
switch records, cpu -1 streams).
Fails (with a message) when perf or userfaultfd is missing: both are prerequisites.
"""
import collections
import os
import pathlib
import shutil
import struct
import subprocess
import sys
import tempfile

# (program, cpus, timeslice, what it adds). threads: 4 threads on 2 CPUs (threads wait, migrate,
# main blocks in futex while the others run); one CPU for everything; signal: a handler entered
# while switched in and out; syscalls: nanosleep/write with 3 CPUs (idle CPUs).
CASES = [
    ('workers', 2, 700, [], 'a contended mutex: holders preempted, waiters blocked in futex'),
    ('workers', 2, 700, ['--timing', 'mtc'], 'MTC timing only: switches last until an MTC edge'),
    ('workers', 1, 200, [], 'one CPU: a preempted lock holder must get the CPU back'),
    ('uffd', 1, 20000, [], 'one CPU: a thread blocked in a page fault (not a syscall) leaves it'),
    ('threads', 2, 1000, [], 'more threads than CPUs'),
    ('threads', 1, 3000, [], 'one CPU'),
    ('signal', 2, 500, [], 'signal handler'),
    ('syscalls', 3, 700, [], 'blocking syscalls, idle CPUs'),
]

PERF_RECORD_AUXTRACE = 71
PERF_RECORD_ITRACE_START = 12
PERF_RECORD_SWITCH_CPU_WIDE = 15
MISC_SWITCH_OUT = 0x2000
MISC_SWITCH_OUT_PREEMPT = 0x4000


def run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=False, **kw)


def per_thread(lines):
    threads = collections.OrderedDict()
    for line in lines:
        f = line.split()
        if len(f) == 2:
            threads.setdefault(int(f[0]), []).append(int(f[1], 16))
    return threads


def read_perf_data(path):
    """(auxtrace [(idx, tid, cpu)], switches [dict], itrace_starts [cpu]) from a perf.data file
    written by export-perf (format/PERF_DATA.md: the trailer is {pid,tid}, time, {cpu,res}, id)."""
    b = pathlib.Path(path).read_bytes()
    if b[:8] != b'PERFILE2':
        raise ValueError(f'{path}: not a perf.data file')
    data_off, data_size = struct.unpack_from('<QQ', b, 40)
    auxtrace, switches, starts = [], [], []
    at, end = data_off, data_off + data_size
    while at + 8 <= end:
        rtype, misc, size = struct.unpack_from('<IHH', b, at)
        if size < 8:
            raise ValueError(f'{path}: record at {at} has size {size}')
        if rtype == PERF_RECORD_AUXTRACE:
            nbytes, _offset, _ref, idx, tid, cpu = struct.unpack_from('<QQQIII', b, at + 8)
            auxtrace.append((idx, tid, cpu))
            at += size + nbytes
            continue
        trailer = at + size - 32
        pid, tid, time, cpu = struct.unpack_from('<IIQI', b, trailer)
        if rtype == PERF_RECORD_SWITCH_CPU_WIDE:
            npid, ntid = struct.unpack_from('<II', b, at + 8)
            switches.append({'out': bool(misc & MISC_SWITCH_OUT),
                             'preempt': bool(misc & MISC_SWITCH_OUT_PREEMPT),
                             'pid': pid, 'tid': tid, 'time': time, 'cpu': cpu,
                             'other_pid': npid, 'other_tid': ntid})
        elif rtype == PERF_RECORD_ITRACE_START:
            starts.append(cpu)
        at += size
    return auxtrace, switches, starts


def check_switches(name, cpus, switches, starts, truth_tids):
    """Per CPU: OUT/IN strictly alternate starting with OUT; an IN names the thread the OUT before
    it named as next, and the OUT names the thread the IN names as previous; times do not
    decrease; no thread is switched in on two CPUs at once; every traced thread ran; at least
    one thread ran on more than one CPU; preemptions (OUT with PREEMPT) and plain switch-outs
    both occur."""
    problems = []
    current = {}            # cpu -> tid switched in (0 = idle)
    pending_out = {}        # cpu -> the OUT record waiting for its IN
    last_time = {}
    cpus_of = collections.defaultdict(set)
    if sorted(set(starts)) != list(range(cpus)):
        problems.append(f'{name}: ITRACE_START on CPUs {sorted(set(starts))}, want 0..{cpus - 1}')
    for i, s in enumerate(switches):
        c = s['cpu']
        where = f'{name}: switch #{i} (cpu {c}, time {s["time"]})'
        if c >= cpus:
            problems.append(f'{where}: cpu out of range')
            continue
        if s['time'] < last_time.get(c, 0):
            problems.append(f'{where}: time goes back from {last_time[c]}')
        last_time[c] = s['time']
        if s['out']:
            if c in pending_out:
                problems.append(f'{where}: two switch-outs in a row')
            if s['tid'] != current.get(c, 0):
                problems.append(f'{where}: switches out tid {s["tid"]}, but {current.get(c, 0)} runs')
            pending_out[c] = s
            continue
        out = pending_out.pop(c, None)
        if out is None:
            problems.append(f'{where}: switch-in without a switch-out before it')
            continue
        if out['other_tid'] != s['tid'] or s['other_tid'] != out['tid']:
            problems.append(f'{where}: OUT {out["tid"]}->next {out["other_tid"]} but IN '
                            f'{s["tid"]}<-prev {s["other_tid"]}')
        if s['tid'] != 0 and s['tid'] in [t for cc, t in current.items() if cc != c]:
            problems.append(f'{where}: tid {s["tid"]} switched in while running on another CPU')
        current[c] = s['tid']
        if s['tid']:
            cpus_of[s['tid']].add(c)
    missing = sorted(set(truth_tids) - set(cpus_of))
    if missing:
        problems.append(f'{name}: threads {missing} retired instructions but were never switched in')
    if cpus > 1 and not any(len(v) > 1 for v in cpus_of.values()):
        problems.append(f'{name}: no thread ran on more than one CPU')
    outs = [s for s in switches if s['out'] and s['tid']]
    if not any(s['preempt'] for s in outs):
        problems.append(f'{name}: no preemption (OUT|PREEMPT) record')
    if not any(not s['preempt'] for s in outs):
        problems.append(f'{name}: no switch-out at a syscall (OUT without PREEMPT)')
    return problems, cpus_of


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


def run_case(pt_emulate, pt_archive, work, prog_name, cpus, timeslice, extra):
    name = ' '.join([prog_name, '--cpus', str(cpus), '--timeslice', str(timeslice)] + extra)
    prog = os.environ.get('PTSCOPE_PROG_' + prog_name.upper())
    if not prog:
        return [f'{name}: PTSCOPE_PROG_{prog_name.upper()} is not set']
    stem = work / f'{prog_name}-{cpus}{"".join(extra)}'
    if prog_name == 'uffd':
        probe = run([prog])
        if probe.returncode == 2:
            return [f'{name}: userfaultfd is not available here ({probe.stderr.strip()}): this case '
                    f'needs it (Linux >= 5.11 allows user-mode-only userfaultfd without privilege; '
                    f'older kernels need vm.unprivileged_userfaultfd=1 or root)']
    gt, ptar, data = stem.with_suffix('.gt'), stem.with_suffix('.ptar'), stem.with_suffix('.data')
    try:  # a scheduling deadlock would hang here: bounded, and reported as such
        r = run([pt_emulate, '--cpus', cpus, '--timeslice', timeslice, '--full', '--ground-truth',
                 gt, '-o', ptar] + extra + ['--', prog], timeout=150)
    except subprocess.TimeoutExpired:
        return [f'{name}: pt-emulate did not finish in 150 s (the traced program deadlocked?)']
    if r.returncode != 0:
        return [f'{name}: pt-emulate rc {r.returncode}: {r.stderr.strip()[:300]}']
    info = run([pt_archive, 'info', ptar])
    problems = []
    if 'per-cpu' not in info.stdout.split('features:')[-1].splitlines()[0]:
        problems.append(f'{name}: the archive lacks the per-cpu feature bit')
    r = run([pt_archive, 'export-perf', ptar, '-o', data])
    if r.returncode != 0:
        return problems + [f'{name}: export-perf: {r.stderr.strip()}']
    auxtrace, switches, starts = read_perf_data(data)
    aux_cpus = sorted({cpu for _, _, cpu in auxtrace})
    if aux_cpus != list(range(cpus)) or any(tid != 0xffffffff for _, tid, _ in auxtrace):
        problems.append(f'{name}: AUXTRACE streams on CPUs {aux_cpus} (tids '
                        f'{sorted({t for _, t, _ in auxtrace})}), want per-CPU on 0..{cpus - 1}')
    truth = per_thread(gt.read_text().splitlines())
    found, cpus_of = check_switches(name, cpus, switches, starts, truth.keys())
    problems += found
    r = run(['perf', 'script', '-i', data, '--itrace=i1i', '-F', 'tid,ip'])
    if r.returncode != 0:
        return problems + [f'{name}: perf script rc {r.returncode}: {r.stderr.strip()[:300]}']
    oracle = compare(name, truth, per_thread(r.stdout.splitlines()))
    problems += oracle
    total = sum(len(v) for v in truth.values())
    migrated = sum(1 for v in cpus_of.values() if len(v) > 1)
    print(f'{name}: {len(truth)} threads, {total} instructions, {len(switches)} switch records, '
          f'{migrated} threads on several CPUs: '
          f'{"MISMATCH" if oracle else "perf == ground truth"}')
    return problems


def check_per_thread_default(pt_emulate, pt_archive, work):
    """Without --cpus: per-thread streams (cpu -1 -> AUXTRACE cpu 0xffffffff), no per-cpu bit,
    no switch records."""
    ptar, data = work / 'default.ptar', work / 'default.data'
    r = run([pt_emulate, '--full', '-o', ptar, '--', os.environ['PTSCOPE_PROG_THREADS']])
    if r.returncode != 0:
        return [f'default: pt-emulate rc {r.returncode}: {r.stderr.strip()[:300]}']
    info = run([pt_archive, 'info', ptar]).stdout
    problems = []
    if 'per-cpu' in info or 'metadata' not in info:
        problems.append('default: the archive is marked per-cpu (or info failed)')
    r = run([pt_archive, 'export-perf', ptar, '-o', data])
    if r.returncode != 0:
        return problems + [f'default: export-perf: {r.stderr.strip()}']
    auxtrace, switches, starts = read_perf_data(data)
    if switches or starts or any(cpu != 0xffffffff for _, _, cpu in auxtrace) or len(
            {tid for _, tid, _ in auxtrace}) != 4:
        problems.append(f'default: want 4 per-thread streams and no switch records, got '
                        f'{len(switches)} switches, AUXTRACE {sorted(set(auxtrace))}')
    print(f'default (no --cpus): {"per-thread as before" if not problems else "CHANGED"}')
    return problems


def main():
    pt_emulate, pt_archive = sys.argv[1:3]
    for name, path in zip(['WORKERS', 'UFFD'], sys.argv[3:5]):
        os.environ['PTSCOPE_PROG_' + name] = path
    if shutil.which('perf') is None:
        print('FAIL: perf is not installed: this test checks against Linux perf\'s own decoder; '
              'scripts/setup installs it (Debian package linux-perf)', file=sys.stderr)
        return 1
    failures = []
    with tempfile.TemporaryDirectory(prefix='percpu_') as tmp:
        work = pathlib.Path(tmp)
        for prog_name, cpus, timeslice, extra, _ in CASES:
            failures += run_case(pt_emulate, pt_archive, work, prog_name, cpus, timeslice, extra)
        failures += check_per_thread_default(pt_emulate, pt_archive, work)
    for f in failures:
        print('FAIL: ' + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
