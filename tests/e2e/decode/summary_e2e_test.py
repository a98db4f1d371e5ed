#!/usr/bin/env python3
"""pt-decode --summary on corpus programs recorded by pt-emulate (issue #8).

  summary_e2e_test.py PT_EMULATE PT_DECODE CALLS RECURSION

Checks, against the programs' source and pt-emulate's ground truth (one retired instruction per
ns under pt-emulate's clock, so times are instruction counts):
- exact call counts: calls.c's tree (top 1, middle_one 2, middle_two 1, leaf_a 3, leaf_b 2,
  leaf_c 1) and recursion.c's recurse (101 calls: recurse(100) .. recurse(0));
- every function's self_ns equals the number of ground-truth instructions inside its own code
  (nm's symbol range): the summary's self time counts exactly the function's own instructions;
- leaves: total_ns = self_ns = max_ns * calls (each call of leaf_a runs the same instructions);
- recursion: total_ns (inclusive, recursive calls once) = max_ns = the outermost call, and
  self_ns = total_ns (recurse calls nothing else);
- the instruction columns equal the time columns for the programs' own functions (same clock;
  not in general: a [syscall] slice takes time but retires no user instructions);
- the per-thread table of the single thread equals the table over all threads;
- --summary, --format summary and a *.summary.txt path give the same bytes;
- the JSON summary (--summary --format json, --format summary-json and a *.summary.json path
  give the same bytes) holds exactly the text tables' numbers, row by row and per thread, and
  its capture totals: instructions = the ground truth's count, one thread, no gaps.
"""
import json
import os
import subprocess
import sys
import tempfile


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        sys.exit(f'FAIL: {" ".join(cmd)}: exit {r.returncode}: {r.stderr[-2000:]}')
    return r


def parse(path):
    """{table title: {function: (calls, total, self, max, insns, self_insns)}}"""
    tables, title = {}, None
    with open(path, encoding='utf-8') as f:
        lines = f.read().split('\n')
    if not lines[0].startswith('pt-decode summary: '):
        sys.exit(f'FAIL: {path} is not a summary: {lines[0]!r}')
    for line in lines[2:]:
        if not line:
            title = None
        elif title is None:
            title = line
            tables[title] = {}
        elif line.lstrip().startswith('calls'):
            if 'insns' not in line:
                sys.exit(f'FAIL: {path}: no instruction columns: {line!r}')
        else:
            fields = line.split(None, 6)
            name = fields[6].split(' [')[0]
            tables[title][name] = tuple(int(x) for x in fields[:6])
    return tables


def symbol_ranges(binary):
    ranges = {}
    out = run(['nm', '-S', '--defined-only', binary]).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in 'tT':
            ranges[parts[3]] = (int(parts[0], 16), int(parts[1], 16))
    return ranges


def own_instructions(truth, binary, functions):
    with open(truth, encoding='utf-8') as f:
        addresses = [int(line.split()[1], 16) for line in f if line.strip()]
    ranges = symbol_ranges(binary)
    bias = addresses[0] - ranges['main'][0]  # tracing starts at main's first instruction
    counts = {}
    for name in functions:
        lo, size = ranges[name]
        lo += bias
        counts[name] = sum(1 for a in addresses if lo <= a < lo + size)
    return counts


def record_and_summarize(emulate, decode, program, work):
    name = os.path.basename(program)
    ptar, truth = os.path.join(work, name + '.ptar'), os.path.join(work, name + '.truth')
    run([emulate, '--full', '--start-at', 'main', '--ground-truth', truth, '-o', ptar, '--',
         program])
    outputs = []
    for args, out in ((['--summary'], 'a.txt'), (['--format', 'summary'], 'b.txt'),
                      ([], 'c.summary.txt')):
        path = os.path.join(work, name + '.' + out)
        run([decode, *args, '-o', path, ptar])
        with open(path, 'rb') as f:
            outputs.append(f.read())
    if not outputs[0] == outputs[1] == outputs[2]:
        sys.exit(f'FAIL: {name}: --summary, --format summary and .summary.txt differ')
    tables = parse(os.path.join(work, name + '.a.txt'))
    check_json(name, work, ptar, decode, tables, truth)
    return tables, truth


def check_json(name, work, ptar, decode, tables, truth):
    outputs = []
    for args, out in ((['--summary', '--format', 'json'], 'a.json'),
                      (['--format', 'summary-json'], 'b.json'), ([], 'c.summary.json')):
        path = os.path.join(work, name + '.' + out)
        run([decode, *args, '-o', path, ptar])
        with open(path, 'rb') as f:
            outputs.append(f.read())
    check(outputs[0] == outputs[1] == outputs[2],
          f'{name}: --summary --format json, --format summary-json and .summary.json differ')
    document = json.loads(outputs[0])
    check((document['schema'], document['version'], document['times']) ==
          ('ptscope-summary', 1, 'ns'), f'{name}: JSON header {list(document.items())[:3]}')

    def rows(functions):
        return {f['function'] + (' (inlined)' if f['inlined'] else ''):
                (f['calls'], f['total_ns'], f['self_ns'], f['max_ns'], f['insns'],
                 f['self_insns']) for f in functions}
    titles = list(tables)
    check(rows(document['functions']) == tables[titles[0]],
          f'{name}: JSON functions differ from the text table over all threads')
    check(len(document['threads']) == 1 and
          rows(document['threads'][0]['functions']) == tables[titles[1]],
          f'{name}: JSON per-thread functions differ from the text table of the thread')
    with open(truth, encoding='utf-8') as f:
        executed = sum(1 for line in f if line.strip())
    capture = document['capture']
    check(capture['instructions'] == executed and capture['threads'] == 1,
          f'{name}: JSON capture {capture}, ground truth {executed} instructions in 1 thread')
    check(set(capture['gaps'].values()) == {0} and capture['missing_modules'] == [],
          f'{name}: JSON capture reports gaps or missing modules: {capture}')
    check(capture['calls'] == sum(r[0] for r in tables[titles[0]].values()),
          f'{name}: JSON capture calls {capture["calls"]} != the table\'s sum')


def check(condition, message):
    if not condition:
        sys.exit('FAIL: ' + message)


def check_common(name, tables, functions):
    check(len(tables) == 2, f'{name}: want the all-threads table and one thread, got {list(tables)}')
    titles = list(tables)
    check(titles[0] == 'all threads', f'{name}: first table is {titles[0]!r}')
    check(tables[titles[0]] == tables[titles[1]], f'{name}: thread table differs from the total')
    rows = tables[titles[0]]
    for function, (calls, total, self_ns, max_ns, insns, self_insns) in rows.items():
        check(self_ns <= total and max_ns <= total, f'{name}: {function}: inconsistent times')
        if function in functions:
            check((insns, self_insns) == (total, self_ns),
                  f'{name}: {function}: instructions {insns}/{self_insns} != ns {total}/{self_ns}')
    return rows


def main():
    emulate, decode, calls_program, recursion_program = sys.argv[1:5]
    with tempfile.TemporaryDirectory(prefix='summary-e2e-') as work:
        tables, truth = record_and_summarize(emulate, decode, calls_program, work)
        expected_calls = {'top': 1, 'middle_one': 2, 'middle_two': 1, 'leaf_a': 3, 'leaf_b': 2,
                          'leaf_c': 1}
        rows = check_common('calls', tables, expected_calls)
        own = own_instructions(truth, calls_program, expected_calls)
        for function, calls in expected_calls.items():
            check(function in rows, f'calls: no row for {function}: {list(rows)}')
            got_calls, total, self_ns, max_ns = rows[function][:4]
            check(got_calls == calls, f'calls: {function}: {got_calls} calls, want {calls}')
            check(self_ns == own[function], f'calls: {function}: self {self_ns} ns, ground truth '
                  f'runs {own[function]} instructions in it')
            if function.startswith('leaf_'):
                check(total == self_ns == max_ns * calls,
                      f'calls: leaf {function}: total {total}, self {self_ns}, max {max_ns}')
        check(rows['main'][0] == 1, f'calls: main: {rows["main"][0]} calls')
        # top's inclusive time is its own code plus its callees' (all nested inside it).
        callees = own['middle_one'] + own['middle_two'] + own['leaf_a'] + own['leaf_b'] + own['leaf_c']
        check(rows['top'][1] == own['top'] + callees,
              f'calls: top: total {rows["top"][1]}, want {own["top"]} + {callees}')

        tables, truth = record_and_summarize(emulate, decode, recursion_program, work)
        rows = check_common('recursion', tables, ['recurse'])
        own = own_instructions(truth, recursion_program, ['recurse'])
        calls, total, self_ns, max_ns = rows.get('recurse', (0, 0, 0, 0))[:4]
        check(calls == 101, f'recursion: recurse: {calls} calls, want 101')
        check(total == max_ns == self_ns == own['recurse'],
              f'recursion: recurse: total {total}, max {max_ns}, self {self_ns}, ground truth '
              f'{own["recurse"]} instructions')
    print('ok')


if __name__ == '__main__':
    main()
