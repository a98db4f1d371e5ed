"""Shared pieces of the ptscope-fleet tests: recording the archives, pt-decode run alone (the
reference every fleet output must equal byte for byte), and reading the fleet's report."""
import json
import os
import pathlib
import shutil
import subprocess
import sys


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def run(cmd, timeout=300, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout,
                          check=False, **kw)


def run_ok(cmd, timeout=300, **kw):
    r = run(cmd, timeout=timeout, **kw)
    if r.returncode != 0:
        raise Failure('%s: exit %d: %s' % (' '.join(map(str, cmd)), r.returncode, r.stderr[-3000:]))
    return r


def require_tools(*paths):
    """A missing prerequisite fails the test loudly (never a skip)."""
    for path in paths:
        if not (os.path.isfile(path) and os.access(path, os.X_OK)) and shutil.which(path) is None:
            raise Failure('prerequisite missing: %s (run scripts/setup and ninja -C build)' % path)


def emulate(pt_emulate, program, out, cpus=0):
    cmd = [pt_emulate, '--full', '--start-at', 'main', '-o', out]
    if cpus:
        cmd += ['--cpus', cpus]
    run_ok(cmd + ['--', program])


def damage(source, out):
    """A copy whose last chunk is cut short, as a recorder killed mid-write leaves it: the chunks
    before it decode, the end is reported as damage."""
    data = pathlib.Path(source).read_bytes()
    pathlib.Path(out).write_bytes(data[:len(data) - 3])


def reference(pt_decode, archive, out_dir, name, symbols=(), trace='perfetto'):
    """pt-decode run alone: NAME.summary.json (and the trace) in out_dir; returns the statuses."""
    extra = []
    for directory in symbols:
        extra += ['--symbols', directory]
    os.makedirs(out_dir, exist_ok=True)
    summary = run([pt_decode, '--summary', '--format', 'json', '-j1'] + extra +
                  ['-o', os.path.join(out_dir, name + '.summary.json'), archive])
    statuses = [summary.returncode]
    messages = [summary.stderr]
    if trace == 'perfetto':
        r = run([pt_decode, '--format', 'perfetto', '-j1'] + extra +
                ['-o', os.path.join(out_dir, name + '.pftrace'), archive])
        statuses.append(r.returncode)
        messages.append(r.stderr)
    return statuses, messages


def fleet(ptscope_fleet, archives, output_dir, report, extra=(), timeout=600):
    r = run([ptscope_fleet, 'decode', '--output-dir', output_dir, '--report', report,
             '--no-progress'] + list(extra) + list(archives), timeout=timeout)
    if r.returncode == 2 or not os.path.exists(report):
        raise Failure('ptscope-fleet decode: exit %d, no report: %s' % (r.returncode, r.stderr))
    with open(report) as f:
        document = json.load(f)
    return r, {os.path.basename(o['archive']): o for o in document['archives']}


def same_bytes(a, b):
    return pathlib.Path(a).read_bytes() == pathlib.Path(b).read_bytes()


def function_names(summary_path):
    with open(summary_path) as f:
        return {row['function'] for row in json.load(f)['functions']}


def main_guard(body):
    try:
        body()
    except Failure as e:
        print('FAIL: %s' % e)
        sys.exit(1)
    print('PASS')
