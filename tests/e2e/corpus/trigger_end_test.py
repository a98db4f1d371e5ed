#!/usr/bin/env python3
"""trigger_end_test.py PT_EMULATE PT_ARCHIVE PT_DECODE CALLS THREADS: a capture that stops at a
trigger (magic-trace's everyday case) decodes with the trigger shown where it fired.

pt-emulate --trigger SYMBOL stops tracing when any thread executes SYMBOL and writes a trigger
marker (tid 0: for every thread) with the TSC of that moment, which is after the last event of
every thread. For each capture, in pt-decode's text output:
  - every thread's track holds exactly one `! [trigger] trigger: SYMBOL` instant, at the marker's
    time (the TSC from `pt-archive info`, converted with the archive's time.* metadata as perf
    does), and no slice of that thread ends after it;
  - no slice is named `0x0`: the branch the trace stops at has no known target, which is neither
    a call of address 0 nor a return that loses the stack;
  - the trigger appears in the Perfetto output too (its name in the trace's strings);
  - the call into the trigger function is shown (a slice named SYMBOL): taking the snapshot
    stops every thread's trace with FUP + TIP.PGD where it was, as the hardware does, so the
    instructions after the last branch packet are decodable;
  - `--format insns` equals pt-emulate's ground truth exactly, thread by thread.
"""
import re
import subprocess
import sys
import tempfile
import pathlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent.parent / 'support'))
import compare_insns  # noqa: E402

THREAD = re.compile(r'^thread (\d+)/(\d+) ')
SLICE = re.compile(r'^\s+\[(\d+) \+(\d+)\] (\S+)')
INSTANT = re.compile(r'^\s+\[(\d+)\] ! (.*)$')


def run(cmd):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f'{" ".join(map(str, cmd))}: exit {r.returncode}: {r.stderr.strip()}')
    return r.stdout


def marker_ns(info):
    """The trigger marker's time in ns, from `pt-archive info` (TSC and time.* metadata)."""
    tsc = int(re.search(r'trigger: tsc (\d+)', info).group(1))
    meta = {k: int(v) for k, v in re.findall(r'^\s+time\.(\w+) = (\d+)$', info, re.M)}
    shift, mult, zero = meta['shift'], meta['mult'], meta['zero']
    quot, rem = tsc >> shift, tsc & ((1 << shift) - 1)
    return zero + quot * mult + ((rem * mult) >> shift)


def check(tools, tmp, program, symbol, problems):
    name = f'{pathlib.Path(program).name} --trigger {symbol}'
    ptar = tmp / f'{pathlib.Path(program).name}.ptar'
    gt = tmp / f'{pathlib.Path(program).name}.gt'
    run([tools['emulate'], '--trigger', symbol, '--ground-truth', gt, '-o', ptar, '--', program])
    want_ns = marker_ns(run([tools['archive'], 'info', ptar]))
    text_path = tmp / f'{ptar.stem}.txt'
    run([tools['decode'], ptar, '-o', text_path])
    threads, current, pid = {}, None, None
    for line in text_path.read_text().splitlines():
        m = THREAD.match(line)
        if m:
            pid = int(m.group(1))
            current = threads.setdefault(int(m.group(2)), {'ends': [], 'triggers': [], 'names': []})
            continue
        if current is None:
            continue
        m = SLICE.match(line)
        if m:
            current['ends'].append(int(m.group(1)) + int(m.group(2)))
            current['names'].append(m.group(3))
            continue
        m = INSTANT.match(line)
        if m and m.group(2).startswith('[trigger]'):
            current['triggers'].append((int(m.group(1)), m.group(2)))
    if not threads:
        problems.append(f'{name}: no thread in the text output')
    for tid, t in sorted(threads.items()):
        want = [(want_ns, f'[trigger] trigger: {symbol}')]
        if t['triggers'] != want:
            problems.append(f'{name}: tid {tid}: trigger instants {t["triggers"]}, want {want}')
        if t['ends'] and max(t['ends']) > want_ns:
            problems.append(f'{name}: tid {tid}: a slice ends at {max(t["ends"])}, after the '
                            f'trigger at {want_ns}')
        if '0x0' in t['names']:
            problems.append(f'{name}: tid {tid}: a slice named 0x0')
        # The main thread and the one that ran into the trigger have run a while; another
        # thread may have been stopped just after its clone (2 slices, seen under load): its
        # instructions are checked exactly against the ground truth below.
        least = 10 if tid == pid or symbol in t['names'] else 1
        if len(t['names']) < least:
            problems.append(f'{name}: tid {tid}: only {len(t["names"])} slices, want {least}+')
    if not any(symbol in t['names'] for t in threads.values()):
        problems.append(f'{name}: no thread shows the call into {symbol}')
    insns = tmp / f'{ptar.stem}.insns'
    run([tools['decode'], ptar, '--format', 'insns', '-o', insns])
    problems += [f'{name}: insns: {p}' for p in compare_insns.compare_exact(
        compare_insns.read_listing(gt), compare_insns.read_listing(insns))]
    trace = tmp / f'{ptar.stem}.pftrace'
    run([tools['decode'], ptar, '-o', trace])
    if f'trigger: {symbol}'.encode() not in trace.read_bytes():
        problems.append(f'{name}: the Perfetto trace does not name the trigger')
    print(f'{name}: {len(threads)} thread(s), trigger at {want_ns} ns')


def main():
    if len(sys.argv) != 6:
        print(__doc__, file=sys.stderr)
        return 2
    tools = dict(zip(['emulate', 'archive', 'decode'], sys.argv[1:4]))
    problems = []
    with tempfile.TemporaryDirectory() as work:
        tmp = pathlib.Path(work)
        check(tools, tmp, sys.argv[4], 'leaf_c', problems)      # calls: main -> top -> ...
        check(tools, tmp, sys.argv[5], 'work_gamma', problems)  # threads: in the third worker
    for p in problems:
        print('FAIL ' + p, file=sys.stderr)
    print(f'{len(problems)} problems')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
