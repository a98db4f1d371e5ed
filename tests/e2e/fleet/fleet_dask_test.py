"""ptscope-fleet on a real Dask cluster: a `dask scheduler` and two `dask worker` processes started
here on 127.0.0.1 (and stopped at the end).

  fleet_dask_test.py --fleet PTSCOPE_FLEET --decode PT_DECODE --emulate PT_EMULATE
      --synth PT_SYNTH --synth-binary ELF --program NAME=PATH...

1. decode   corpus captures (calls, recursion), a per-CPU one (threads, --cpus 2), a damaged one
            (its last chunk cut short), a file that is no archive, and two captures of a stripped
            binary: every output is byte-identical to pt-decode run alone; every archive's
            status is pt-decode's own; the damaged one is reported with pt-decode's message, the
            garbage one fails with it, the others are done; the run's status is the worst; the
            dashboard address printed answers.
2. again    the same command: nothing is decoded again (outputs untouched), the failure retried.
3. symbols  with --symbols naming the stripped binary: exactly the two captures of it are
            decoded again, now with the program's function names, byte-identical to pt-decode
            alone with the same --symbols.
4. summary  `ptscope-fleet summary`: per function, calls and instructions equal the sums over the
            per-archive summaries, captures the number it appears in, max the largest per-capture
            max; the CSV holds the same rows as the JSON.
5. debuginfod  a capture whose binary is gone from this host, its symbols served by a real
            `debuginfod` (the second deployment): decoded through --debuginfod with the program's
            names, byte-identical to pt-decode alone with the same URL; again: up to date (the
            workers' debuginfod cache keeps the key still); without the URL: failed (pt-decode
            decodes no instruction: status 1), the report naming the missing build id, the
            outputs of the decode with the URL left as they were.
6. kill     eight larger captures; one worker is killed (SIGKILL) while its pt-decode runs: every
            archive still finishes, the one it was decoding on the other worker, every output is
            complete and byte-identical to pt-decode alone, and no temporary file is left; a
            watcher reading the output directory all along never sees an output under its final
            name that is not already whole.
Expected values come from pt-decode run alone and from the per-archive files, never from the
fleet's own numbers.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'support'))
from debuginfod_server import DebuginfodServer  # noqa: E402
from fleet_common import (Failure, check, damage, emulate, fleet, function_names,  # noqa: E402
                          main_guard, reference, require_tools, run, run_ok, same_bytes)

import distributed  # noqa: E402  (Debian's python3-distributed: this runs on /usr/bin/python3)

FNPTR_FUNCTIONS = {'main', 'apply_all', 'op_add', 'op_sub', 'op_mul'}


class Cluster:
    """A scheduler and named workers (no nanny: a killed worker stays dead)."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.dask = os.path.join(os.path.dirname(os.path.realpath(sys.executable)), 'dask')
        require_tools(self.dask)
        self.file = os.path.join(tmp, 'scheduler.json')
        self.processes = {}
        self.logs = []

    def spawn(self, name, args):
        log = open(os.path.join(self.tmp, name + '.log'), 'w')
        self.logs.append(log)
        # Each worker its own debuginfod client cache, as on separate hosts.
        env = dict(os.environ, DEBUGINFOD_CACHE_PATH=os.path.join(self.tmp, name + '-cache'))
        self.processes[name] = subprocess.Popen([self.dask] + args, stdout=log, stderr=log,
                                                stdin=subprocess.DEVNULL, env=env)

    def start(self, workers):
        self.spawn('scheduler', ['scheduler', '--host', '127.0.0.1', '--port', '0',
                                 '--dashboard-address', '127.0.0.1:0',
                                 '--scheduler-file', self.file])
        deadline = time.monotonic() + 60
        while not os.path.exists(self.file):
            check(time.monotonic() < deadline and self.processes['scheduler'].poll() is None,
                  'the dask scheduler did not start: %s' % self.log('scheduler'))
            time.sleep(0.1)
        for name in workers:
            self.spawn(name, ['worker', '--scheduler-file', self.file, '--name', name,
                              '--nthreads', '1', '--no-nanny', '--no-dashboard', '--host',
                              '127.0.0.1', '--local-directory', os.path.join(self.tmp, name)])
        with distributed.Client(scheduler_file=self.file, timeout='60s') as client:
            client.wait_for_workers(len(workers), timeout=120)
            self.address = client.scheduler.address
            self.worker_pids = client.run(os.getpid)  # address -> pid
        return self.address

    def log(self, name):
        return pathlib.Path(self.tmp, name + '.log').read_text()[-3000:]

    def stop(self):
        for name, process in self.processes.items():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for log in self.logs:
            log.close()


def temporaries(directory):
    return [n for n in os.listdir(directory) if n.startswith('.')]


def expect_outputs(out, ref, name, trace=True):
    files = [name + '.summary.json'] + ([name + '.pftrace'] if trace else [])
    for f in files:
        check(os.path.isfile(os.path.join(out, f)), '%s missing from %s' % (f, out))
        check(same_bytes(os.path.join(out, f), os.path.join(ref, f)),
              '%s differs from pt-decode run alone (%s)' % (f, ref))


def phase_decode(a, tmp, archives, scheduler, expected, stderr_of):
    out, report = os.path.join(tmp, 'out'), os.path.join(tmp, 'report1.json')
    r, outcomes = fleet(a.fleet, archives.values(), out, report, ['--scheduler', scheduler])
    check(set(outcomes) == {os.path.basename(p) for p in archives.values()},
          'the report does not list every archive: %s' % sorted(outcomes))
    for name, path in archives.items():
        o = outcomes[os.path.basename(path)]
        want = max(expected[name], key=lambda s: {0: 0, 3: 1, 1: 2, 2: 3}[s])
        check(o['status'] == want, '%s: fleet status %d, pt-decode alone %d' %
              (name, o['status'], want))
        if want in (0, 3):
            check(o['state'] == 'decoded', '%s: state %s, want decoded' % (name, o['state']))
            expect_outputs(out, os.path.join(tmp, 'ref'), name)
        else:
            check(o['state'] == 'failed', '%s: state %s, want failed' % (name, o['state']))
            first = stderr_of[name].strip().splitlines()[0]
            check(first in o['message'], '%s: message %r lacks pt-decode\'s %r' %
                  (name, o['message'], first))
            check(('FAILED (status %d): %s' % (want, path)) in r.stderr,
                  'the final report does not list the failure of %s: %s' % (name, r.stderr))
            check(first in r.stderr, 'the final report lacks pt-decode\'s message %r' % first)
    damaged = outcomes['damaged.ptar']
    check('damaged' in damaged['message'], 'the damaged archive\'s report says nothing of the '
          'damage: %r' % damaged['message'])
    check(damaged['status'] == 3 and damaged['state'] == 'decoded',
          'the damaged archive: %s status %d, want decoded, partial (status 3)' %
          (damaged['state'], damaged['status']))
    check('partial (status 3): %s' % archives['damaged'] in r.stderr,
          'the final report does not list the partial archive: %s' % r.stderr)
    worst = max((o['status'] for o in outcomes.values()), key=lambda s: {0: 0, 3: 1, 1: 2}[s])
    check(r.returncode == worst, 'exit status %d, worst archive status %d' % (r.returncode, worst))
    match = re.search(r'Dask dashboard: (http://\S+)', r.stderr)
    check(match is not None, 'no dashboard address printed: %s' % r.stderr)
    with urllib.request.urlopen(match.group(1), timeout=30) as page:
        check(page.status == 200, '%s answered %d' % (match.group(1), page.status))
    check(not temporaries(out), 'temporary files left: %s' % temporaries(out))
    return out


def phase_again(a, tmp, archives, scheduler, out):
    before = {n: os.stat(os.path.join(out, n)).st_mtime_ns for n in os.listdir(out)}
    _, outcomes = fleet(a.fleet, archives.values(), out, os.path.join(tmp, 'report2.json'),
                        ['--scheduler', scheduler])
    for base, o in outcomes.items():
        want = 'failed' if base == 'garbage.ptar' else 'skipped'
        check(o['state'] == want, 'again: %s %s, want %s' % (base, o['state'], want))
    after = {n: os.stat(os.path.join(out, n)).st_mtime_ns for n in os.listdir(out)}
    check(before == after, 'again: outputs were rewritten')


def phase_symbols(a, tmp, archives, scheduler, out, symbols):
    for name in ('stripped-a', 'stripped-b'):
        names = function_names(os.path.join(out, name + '.summary.json'))
        check(not names & FNPTR_FUNCTIONS, '%s named %s before its symbols came' %
              (name, names & FNPTR_FUNCTIONS))
    ref = os.path.join(tmp, 'ref-symbols')
    for name in ('stripped-a', 'stripped-b'):
        reference(a.decode, archives[name], ref, name, symbols=[symbols])
    _, outcomes = fleet(a.fleet, archives.values(), out, os.path.join(tmp, 'report3.json'),
                        ['--scheduler', scheduler, '--symbols', symbols])
    for name, path in archives.items():
        o = outcomes[os.path.basename(path)]
        want = ('decoded' if name.startswith('stripped') else
                'failed' if name == 'garbage' else 'skipped')
        check(o['state'] == want, 'symbols: %s %s, want %s' % (name, o['state'], want))
    for name in ('stripped-a', 'stripped-b'):
        expect_outputs(out, ref, name)
        names = function_names(os.path.join(out, name + '.summary.json'))
        check(FNPTR_FUNCTIONS <= names, '%s: names %s still missing with --symbols' %
              (name, FNPTR_FUNCTIONS - names))


def phase_summary(a, tmp, out):
    r = run([a.fleet, 'summary', out, '--top', '5'])
    check(r.returncode == 0, 'summary: exit %d: %s' % (r.returncode, r.stderr))
    sums = {}
    captures = sorted(n[:-len('.summary.json')] for n in os.listdir(out)
                      if n.endswith('.summary.json') and not n.startswith('.'))
    for capture in captures:
        with open(os.path.join(out, capture + '.summary.json')) as f:
            for row in json.load(f)['functions']:
                key = (row['module'], row['function'], row['inlined'])
                s = sums.setdefault(key, {'calls': 0, 'insns': 0, 'captures': 0, 'max': 0})
                s['calls'] += row['calls']
                s['insns'] += row['insns']
                s['captures'] += 1
                s['max'] = max(s['max'], row['max_ns'])
    with open(os.path.join(out, 'fleet-summary.json')) as f:
        document = json.load(f)
    check(document['schema'] == 'ptscope-fleet-summary' and document['version'] == 1,
          'fleet summary schema/version: %r %r' % (document.get('schema'), document.get('version')))
    check(sorted(document['captures']) == captures, 'captures %s, want %s' %
          (document['captures'], captures))
    rows = {(r['module'], r['function'], r['inlined']): r for r in document['functions']}
    check(set(rows) == set(sums), 'fleet rows differ from the per-archive functions: %s' %
          sorted(set(rows) ^ set(sums))[:10])
    for key, s in sums.items():
        row = rows[key]
        check((row['calls'], row['insns'], row['captures'], row['max_ns_max']) ==
              (s['calls'], s['insns'], s['captures'], s['max']),
              '%s: fleet %s, sums %s' % (key, row, s))
    check(sum(r['calls'] for r in rows.values()) == sum(s['calls'] for s in sums.values()),
          'total calls differ')
    with open(os.path.join(out, 'fleet-summary.csv')) as f:
        lines = f.read().splitlines()
    check(len(lines) == len(rows) + 1, 'CSV has %d rows, JSON %d' % (len(lines) - 1, len(rows)))
    top = max(rows.values(), key=lambda r: r['total_ns'])
    check(top['function'] in r.stdout, 'terminal table lacks the top function %s' % top['function'])


class TornFileWatcher(threading.Thread):
    """Looks at the output directory while a run goes on: every output under its final name must
    already be whole (the reference bytes), never a file still being written."""

    def __init__(self, directory, expected):
        super().__init__(daemon=True)
        self.directory, self.expected = directory, expected
        self.torn, self.looks = [], 0
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            self.looks += 1
            for name in os.listdir(self.directory):
                suffix = next((s for s in self.expected if name.endswith(s)), None)
                if suffix is None or name.startswith('.'):
                    continue
                try:
                    data = pathlib.Path(self.directory, name).read_bytes()
                except FileNotFoundError:
                    continue
                if data != self.expected[suffix]:
                    self.torn.append('%s (%d of %d bytes)' % (name, len(data),
                                                              len(self.expected[suffix])))
            time.sleep(0.005)

    def stop(self):
        self.done.set()
        self.join()


def phase_debuginfod(a, tmp, scheduler, program):
    served, gone = os.path.join(tmp, 'served'), os.path.join(tmp, 'gone')
    os.makedirs(served)
    os.makedirs(gone)
    binary = os.path.join(gone, 'recursion')
    shutil.copy2(program, binary)
    archive = os.path.join(tmp, 'gone.ptar')
    emulate(a.emulate, binary, archive)
    os.unlink(binary)  # decoded elsewhere: the binary is not on the decoding hosts
    shutil.copy2(program, os.path.join(served, 'recursion'))
    build_id = next(line.split()[-1] for line in
                    run_ok(['readelf', '-n', program]).stdout.splitlines() if 'Build ID' in line)
    out, ref = os.path.join(tmp, 'out-debuginfod'), os.path.join(tmp, 'ref-debuginfod')
    with DebuginfodServer(served, build_id) as url:
        env = dict(os.environ, DEBUGINFOD_CACHE_PATH=os.path.join(tmp, 'ref-cache'))
        os.makedirs(ref)
        for args in (['--summary', '--format', 'json', '-o',
                      os.path.join(ref, 'gone.summary.json')],
                     ['-o', os.path.join(ref, 'gone.pftrace')]):
            run_ok([a.decode, '-j1', '--debuginfod', url] + args + [archive], env=env)
        for attempt, want in (('first', 'decoded'), ('again', 'skipped')):
            _, outcomes = fleet(a.fleet, [archive], out, os.path.join(tmp, 'report-d.json'),
                                ['--scheduler', scheduler, '--debuginfod', url])
            o = outcomes['gone.ptar']
            check(o['state'] == want and o['status'] == 0,
                  'debuginfod %s: %s status %d, want %s: %s' % (attempt, o['state'], o['status'],
                                                                want, o.get('message')))
        expect_outputs(out, ref, 'gone')
    check('recurse' in function_names(os.path.join(out, 'gone.summary.json')),
          'debuginfod: the served binary gave no names')
    _, outcomes = fleet(a.fleet, [archive], out, os.path.join(tmp, 'report-d.json'),
                        ['--scheduler', scheduler])
    o = outcomes['gone.ptar']
    check(o['state'] == 'failed' and o['status'] == 1,
          'without --debuginfod: %s status %d, want failed (status 1: no instruction decoded)' %
          (o['state'], o['status']))
    check(build_id in o.get('message', '') and '--symbols' in o.get('message', ''),
          'without --debuginfod: the report does not say which build is missing and what to '
          'pass: %r' % o.get('message'))
    expect_outputs(out, ref, 'gone')  # a failed decode leaves the outputs it would replace


def worker_child_decoding(pid):
    """The archive a pt-decode child of `pid` is decoding (not listing modules), or None."""
    for task in os.listdir('/proc/%d/task' % pid):
        try:
            children = pathlib.Path('/proc/%d/task/%s/children' % (pid, task)).read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                argv = pathlib.Path('/proc/%s/cmdline' % child).read_bytes().split(b'\0')
            except OSError:
                continue
            words = [w.decode() for w in argv if w]
            if any(w.endswith('pt-decode') for w in words) and '--list-modules' not in words:
                return words[-1]
    return None


def phase_kill(a, tmp, cluster):
    archives_dir, ref = os.path.join(tmp, 'big'), os.path.join(tmp, 'ref-big')
    os.makedirs(archives_dir)
    first = os.path.join(archives_dir, 'walk-0.ptar')
    run_ok([a.synth, '-o', first, '--binary', a.synth_binary, '--instructions', '20000000',
            '--seed', '7'])
    archives = [first]
    for i in range(1, 8):
        archives.append(os.path.join(archives_dir, 'walk-%d.ptar' % i))
        shutil.copyfile(first, archives[-1])
    statuses, _ = reference(a.decode, first, ref, 'walk-0')
    check(statuses == [0, 0], 'pt-decode alone on the walk: %s' % statuses)
    out, report = os.path.join(tmp, 'out-kill'), os.path.join(tmp, 'report-kill.json')
    os.makedirs(out)
    watcher = TornFileWatcher(out, {suffix: pathlib.Path(ref, 'walk-0' + suffix).read_bytes()
                                    for suffix in ('.summary.json', '.pftrace')})
    watcher.start()
    fleet_run = subprocess.Popen(
        [a.fleet, 'decode', '--output-dir', out, '--report', report, '--no-progress',
         '--scheduler', cluster.address] + archives,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    victim_address = next(addr for addr, _ in sorted(cluster.worker_pids.items()))
    victim = cluster.worker_pids[victim_address]
    deadline, decoding = time.monotonic() + 120, None
    while decoding is None:
        check(time.monotonic() < deadline and fleet_run.poll() is None,
              'worker %d never ran pt-decode' % victim)
        decoding = worker_child_decoding(victim)
        time.sleep(0.01)
    os.kill(victim, signal.SIGKILL)
    stdout, stderr = fleet_run.communicate(timeout=600)
    watcher.stop()
    check(fleet_run.returncode == 0, 'kill: exit %d: %s' % (fleet_run.returncode, stderr))
    check(not watcher.torn, 'kill: outputs seen incomplete while the run went on: %s' %
          watcher.torn[:5])
    check(watcher.looks > 20, 'kill: the watcher looked only %d times' % watcher.looks)
    with open(report) as f:
        outcomes = {o['archive']: o for o in json.load(f)['archives']}
    check(len(outcomes) == 8 and all(o['state'] == 'decoded' for o in outcomes.values()),
          'kill: not every archive decoded: %s' % {k: o['state'] for k, o in outcomes.items()})
    check(outcomes[decoding]['worker'] != victim_address,
          'kill: %s reported as decoded by the killed worker' % decoding)
    print('kill: worker %s (pid %d) killed while decoding %s; %s decoded it again' %
          (victim_address, victim, os.path.basename(decoding), outcomes[decoding]['worker']))
    for archive in archives:
        name = os.path.basename(archive)[:-len('.ptar')]
        for suffix in ('.summary.json', '.pftrace'):
            check(same_bytes(os.path.join(out, name + suffix),
                             os.path.join(ref, 'walk-0' + suffix)),
                  'kill: %s%s differs from pt-decode alone' % (name, suffix))
    time.sleep(0.5)  # a pt-decode of the killed worker would have been killed with it
    check(not temporaries(out), 'kill: temporary files left: %s' % temporaries(out))


def main():
    p = argparse.ArgumentParser()
    for option in ('--fleet', '--decode', '--emulate', '--synth', '--synth-binary'):
        p.add_argument(option, required=True)
    p.add_argument('--program', action='append', default=[])
    a = p.parse_args()
    programs = dict(item.split('=', 1) for item in a.program)
    os.environ.pop('DEBUGINFOD_URLS', None)  # nothing is fetched unless a test says where from

    require_tools(a.fleet, a.decode, a.emulate, a.synth, *programs.values())
    tmp = tempfile.mkdtemp(prefix='ptscope-fleet-dask-')
    cluster = Cluster(tmp)
    try:
        arch, bin_dir, symbols = (os.path.join(tmp, d) for d in ('archives', 'bin', 'symbols'))
        for d in (arch, bin_dir, symbols):
            os.makedirs(d)
        archives = {n: os.path.join(arch, n + '.ptar') for n in
                    ('calls', 'recursion', 'threads-percpu', 'damaged', 'garbage', 'stripped-a',
                     'stripped-b')}
        emulate(a.emulate, programs['calls'], archives['calls'])
        emulate(a.emulate, programs['recursion'], archives['recursion'])
        emulate(a.emulate, programs['threads'], archives['threads-percpu'], cpus=2)
        damage(archives['calls'], archives['damaged'])
        pathlib.Path(archives['garbage']).write_bytes(b'this is not a ptscope archive\n' * 4)
        # As in production: the binary that ran is stripped (same build id); its symbols come
        # later. (It runs unstripped so that the capture can start at main.)
        stripped = os.path.join(bin_dir, 'fnptr')
        shutil.copyfile(programs['fnptr'], stripped)
        shutil.copymode(programs['fnptr'], stripped)
        emulate(a.emulate, stripped, archives['stripped-a'])
        emulate(a.emulate, stripped, archives['stripped-b'], cpus=2)
        run_ok(['objcopy', '--strip-all', stripped])
        shutil.copyfile(programs['fnptr'], os.path.join(symbols, 'fnptr-unstripped'))
        expected, stderr_of = {}, {}
        for name, path in archives.items():
            statuses, messages = reference(a.decode, path, os.path.join(tmp, 'ref'), name)
            expected[name], stderr_of[name] = statuses, messages[0]
        check(expected['garbage'][0] == 1, 'pt-decode alone on garbage: %s' % expected['garbage'])
        check(all(s == 0 for n in ('calls', 'recursion', 'threads-percpu', 'stripped-a',
                                   'stripped-b') for s in expected[n]),
              'pt-decode alone did not decode the intact captures: %s' % expected)
        scheduler = cluster.start(['worker-a', 'worker-b'])
        out = phase_decode(a, tmp, archives, scheduler, expected, stderr_of)
        phase_again(a, tmp, archives, scheduler, out)
        phase_symbols(a, tmp, archives, scheduler, out, symbols)
        phase_summary(a, tmp, out)
        phase_debuginfod(a, tmp, scheduler, programs['recursion'])
        phase_kill(a, tmp, cluster)
    finally:
        cluster.stop()
        if os.environ.get('PTSCOPE_KEEP_TMP'):
            print('kept %s' % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    main_guard(main)
