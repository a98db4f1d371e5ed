"""`ptscope-fleet summary OUTDIR`: one table per function over every capture, reduced from the
per-archive summaries pt-decode wrote (`pt-decode --summary --format json`, docs/SUMMARY_JSON.md).

A row is a function as pt-decode's summary names it: (module, function, inlined). Per row:
  captures        in how many captures it ran
  calls, total_ns, self_ns, insns, self_insns   sums over the captures
  max_ns_p50/p99/max   over the captures it ran in, the nearest-rank percentiles of each
                       capture's longest call (a capture's max_ns for the row)
"""
import csv
import json
import math
import os

SUMMARY_SCHEMA = 'ptscope-summary'
SUMMARY_VERSION = 1
FLEET_SCHEMA = 'ptscope-fleet-summary'
FLEET_VERSION = 1
SUMS = ('calls', 'total_ns', 'self_ns', 'insns', 'self_insns')
CSV_COLUMNS = ('module', 'function', 'inlined', 'captures') + SUMS + (
    'max_ns_p50', 'max_ns_p99', 'max_ns_max')


class BadSummary(Exception):
    pass


def nearest_rank(sorted_values, percent):
    """The smallest value with at least `percent`% of the values at or below it."""
    rank = max(1, math.ceil(percent / 100.0 * len(sorted_values)))
    return sorted_values[rank - 1]


def load_summary(path):
    try:
        with open(path, 'rb') as f:
            document = json.load(f)
    except OSError as e:
        raise BadSummary('%s: cannot read it: %s' % (path, e.strerror or e)) from None
    except ValueError as e:
        raise BadSummary('%s: not JSON (%s); was it written by pt-decode --summary --format json?'
                         % (path, e)) from None
    if not isinstance(document, dict) or document.get('schema') != SUMMARY_SCHEMA:
        raise BadSummary('%s: not a pt-decode JSON summary (no "schema": "%s")' %
                         (path, SUMMARY_SCHEMA))
    if document.get('version') != SUMMARY_VERSION:
        raise BadSummary('%s: summary version %r; this ptscope-fleet reads version %d (decode '
                         'again with the matching pt-decode)' %
                         (path, document.get('version'), SUMMARY_VERSION))
    functions = document.get('functions')
    if not isinstance(functions, list):
        raise BadSummary('%s: "functions" is missing or not a list' % path)
    for i, row in enumerate(functions):
        for field in SUMS + ('max_ns',):
            if not isinstance(row.get(field), int):
                raise BadSummary('%s: functions[%d].%s is missing or not an integer' %
                                 (path, i, field))
        if not isinstance(row.get('function'), str) or not isinstance(row.get('module'), str):
            raise BadSummary('%s: functions[%d] has no function or module name' % (path, i))
    return document


def summary_files(output_dir):
    return sorted(os.path.join(output_dir, name) for name in os.listdir(output_dir)
                  if name.endswith('.summary.json') and not name.startswith('.'))


def reduce(documents):
    """documents: [(capture name, summary document)] -> rows, sorted by total_ns, then calls
    (descending), then module, function, inlined."""
    rows = {}
    for _, document in documents:
        for f in document['functions']:
            key = (f['module'], f['function'], bool(f.get('inlined', False)))
            row = rows.get(key)
            if row is None:
                row = rows[key] = dict.fromkeys(SUMS, 0)
                row.update(module=key[0], function=key[1], inlined=key[2], captures=0,
                           max_ns_values=[])
            for field in SUMS:
                row[field] += f[field]
            # pt-decode writes one row per function per capture; a capture counts once.
            row['max_ns_values'].append(f['max_ns'])
            row['captures'] += 1
    result = []
    for row in rows.values():
        values = sorted(row.pop('max_ns_values'))
        row.update(max_ns_p50=nearest_rank(values, 50), max_ns_p99=nearest_rank(values, 99),
                   max_ns_max=values[-1])
        result.append(row)
    result.sort(key=lambda r: (-r['total_ns'], -r['calls'], r['module'], r['function'],
                               r['inlined']))
    return result


def duration(ns):
    if ns < 10_000:
        return '%d ns' % ns
    if ns < 10_000_000:
        return '%.1f us' % (ns / 1e3)
    if ns < 10_000_000_000:
        return '%.1f ms' % (ns / 1e6)
    return '%.1f s' % (ns / 1e9)


def table(rows, top):
    header = ('%8s %10s %11s %11s %14s %11s %11s %11s  %s' %
              ('captures', 'calls', 'total', 'self', 'insns', 'max p50', 'max p99', 'max',
               'function [module]'))
    lines = [header]
    for r in rows[:top] if top else rows:
        name = r['function'] + (' (inlined)' if r['inlined'] else '')
        if r['module']:
            name += ' [%s]' % r['module']
        lines.append('%8d %10d %11s %11s %14d %11s %11s %11s  %s' % (
            r['captures'], r['calls'], duration(r['total_ns']), duration(r['self_ns']), r['insns'],
            duration(r['max_ns_p50']), duration(r['max_ns_p99']), duration(r['max_ns_max']), name))
    return '\n'.join(lines) + '\n'


def write_outputs(rows, captures, prefix):
    """PREFIX.csv and PREFIX.json, each written to a temporary name and renamed."""
    temp = prefix + '.csv.tmp'
    with open(temp, 'w', newline='', encoding='utf-8') as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS, lineterminator='\n')
        writer.writeheader()
        for r in rows:
            writer.writerow({c: (int(r[c]) if c == 'inlined' else r[c]) for c in CSV_COLUMNS})
    os.replace(temp, prefix + '.csv')
    document = {'schema': FLEET_SCHEMA, 'version': FLEET_VERSION, 'times': 'ns',
                'captures': captures, 'functions': [{c: r[c] for c in CSV_COLUMNS} for r in rows]}
    temp = prefix + '.json.tmp'
    with open(temp, 'w', encoding='utf-8') as f:
        json.dump(document, f, indent=1)
        f.write('\n')
    os.replace(temp, prefix + '.json')


def summarize(output_dir, prefix, top, out, err):
    """Returns the exit status: 0, 3 when some summaries could not be read (the table leaves them
    out and says so), 1 when there is nothing to reduce."""
    if not os.path.isdir(output_dir):
        print('ptscope-fleet summary: %s is not a directory' % output_dir, file=err)
        return 2
    documents, bad = [], []
    for path in summary_files(output_dir):
        try:
            documents.append((os.path.basename(path)[:-len('.summary.json')], load_summary(path)))
        except BadSummary as e:
            bad.append(str(e))
    for message in bad:
        print('ptscope-fleet summary: left out %s' % message, file=err)
    if not documents:
        print('ptscope-fleet summary: no readable NAME.summary.json in %s (write them with '
              '`ptscope-fleet decode ... --output-dir %s`)' % (output_dir, output_dir), file=err)
        return 1
    rows = reduce(documents)
    captures = [name for name, _ in documents]
    write_outputs(rows, captures, prefix)
    out.write('%d captures, %d functions; times are sums over the captures, "max" columns are '
              'percentiles of each capture\'s longest call\n' % (len(captures), len(rows)))
    out.write(table(rows, top))
    print('ptscope-fleet summary: wrote %s.csv and %s.json' % (prefix, prefix), file=err)
    return 3 if bad else 0
