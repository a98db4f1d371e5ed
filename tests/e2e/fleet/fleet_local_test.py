"""ptscope-fleet without --scheduler: its own Dask LocalCluster on this machine, as a fresh clone
runs it after scripts/setup (build/tools/fleet/ptscope-fleet, Debian's python3).

  fleet_local_test.py --fleet PTSCOPE_FLEET --decode PT_DECODE --emulate PT_EMULATE
      --build-dir BUILD --program NAME=PATH...

- two corpus captures, given as a glob and as a manifest line, decode to outputs byte-identical
  to pt-decode run alone, with --format text as well as the default; exit status 0;
- the plain log (stderr is no terminal) has a line per archive and names the dashboard; on a
  terminal (a pty) the live bar is drawn in place instead and ends at every archive done;
- usage errors exit 2 before any cluster starts: no archive, a glob matching nothing, a
  --symbols that is no directory; a --scheduler nobody listens at exits 1, saying so;
- Ctrl-C after the first of six larger archives: exit 1 saying so, every output written is whole,
  no temporary file is left, and the same command then decodes exactly the rest;
- `meson install` installs ptscope-fleet, its package and the pt-decode it runs by default.
"""
import argparse
import json
import os
import pty
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet_common import (check, emulate, fleet, main_guard, reference, require_tools,  # noqa: E402
                          run, run_ok, same_bytes)


def usage_errors(a, tmp):
    cases = [
        ([], 'no archive given'),
        ([os.path.join(tmp, 'nothing-*.ptar')], 'no file matches'),
        (['--symbols', os.path.join(tmp, 'absent'), os.path.join(tmp, 'arch', 'calls.ptar')],
         'is not a directory'),
    ]
    for args, text in cases:
        r = run([a.fleet, 'decode', '--output-dir', os.path.join(tmp, 'unused')] + args)
        check(r.returncode == 2, 'usage %s: exit %d, want 2' % (args, r.returncode))
        check(text in r.stderr, 'usage %s: %r not in %r' % (args, text, r.stderr))
        check('Dask' not in r.stderr, 'usage %s: a cluster was started' % args)
    # A scheduler nobody listens at: exit 1 with what to check, after Dask's connect timeout.
    env = dict(os.environ, DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT='2s')
    r = run([a.fleet, 'decode', '--output-dir', os.path.join(tmp, 'unused'), '--scheduler',
             'tcp://127.0.0.1:1', os.path.join(tmp, 'arch', 'calls.ptar')], env=env)
    check(r.returncode == 1 and 'cannot reach the Dask scheduler at tcp://127.0.0.1:1' in r.stderr,
          'unreachable scheduler: exit %d: %s' % (r.returncode, r.stderr))
    check('Traceback' not in r.stderr, 'unreachable scheduler: a traceback: %s' % r.stderr)


def terminal_progress(a, tmp, archives):
    """With stderr on a terminal: the live bar, redrawn in place, ends at 2/2; no plain log."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([a.fleet, 'decode', '--output-dir', os.path.join(tmp, 'out-tty'),
                             '--force'] + archives, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    check(proc.wait(timeout=300) == 0, 'tty run: exit %d' % proc.returncode)
    text = b''.join(chunks).decode(errors='replace')
    bars = re.findall(r'\r\x1b\[K\[([#.]{24})\] (\d)/2  decoded (\d)', text)
    check(bars and bars[-1] == ('#' * 24, '2', '2'), 'tty run: no bar ending at 2/2: %r' % text)
    check(re.search(r'insns/s  \d+ s', text), 'tty run: the bar lacks the rate: %r' % text)
    check('.ptar decoded, ' not in text, 'tty run: the plain log was printed on a terminal: %r' %
          text)


def interrupted(a, tmp):
    """Ctrl-C (SIGINT) after the first archive: exit 1 saying so; what was written is whole (the
    reference bytes), nothing temporary is left, and the same command then finishes the rest."""
    walks = os.path.join(tmp, 'walks')
    os.makedirs(walks)
    first = os.path.join(walks, 'walk-0.ptar')
    run_ok([a.synth, '-o', first, '--binary', a.synth_binary, '--instructions', '20000000',
            '--seed', '11'])
    archives = [first]
    for i in range(1, 6):
        archives.append(os.path.join(walks, 'walk-%d.ptar' % i))
        shutil.copyfile(first, archives[-1])
    ref = os.path.join(tmp, 'ref-walk')
    statuses, _ = reference(a.decode, first, ref, 'walk-0')
    check(statuses == [0, 0], 'pt-decode alone on the walk: %s' % statuses)
    out = os.path.join(tmp, 'out-interrupted')
    cmd = [a.fleet, 'decode', '--output-dir', out, '--no-progress', '--local-workers', '1']
    proc = subprocess.Popen(cmd + archives, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 120
    while not (os.path.isdir(out) and any(n.endswith('.fleet.json') for n in os.listdir(out))):
        check(time.monotonic() < deadline and proc.poll() is None,
              'interrupt: no archive finished: %s' % (proc.stderr.read() if proc.poll() else ''))
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    check(proc.returncode == 1 and 'interrupted after' in stderr and 'Traceback' not in stderr,
          'interrupt: exit %d: %s' % (proc.returncode, stderr))
    names = os.listdir(out)
    check(not [n for n in names if n.startswith('.')],
          'interrupt: temporary files left: %s' % names)
    records = [n[:-len('.fleet.json')] for n in names if n.endswith('.fleet.json')]
    check(len(records) < len(archives), 'interrupt: every archive finished before Ctrl-C')
    for name in records:
        for suffix in ('.summary.json', '.pftrace'):
            check(same_bytes(os.path.join(out, name + suffix),
                             os.path.join(ref, 'walk-0' + suffix)),
                  'interrupt: %s%s is not whole' % (name, suffix))
    r, outcomes = fleet(a.fleet, archives, out, os.path.join(tmp, 'report-rest.json'),
                        ['--local-workers', '1'])
    states = sorted(o['state'] for o in outcomes.values())
    check(r.returncode == 0 and states.count('skipped') == len(records) and
          states.count('decoded') == len(archives) - len(records),
          'after the interrupt: exit %d, %s (%d were done)' % (r.returncode, states, len(records)))


def installed(a):
    r = run(['meson', 'introspect', '--installed', a.build_dir])
    check(r.returncode == 0, 'meson introspect --installed: %s' % r.stderr)
    targets = {os.path.basename(dest): dest for dest in json.loads(r.stdout).values()}
    for name in ('ptscope-fleet', 'pt-decode', 'cli.py', 'task.py', 'run.py', 'summary.py'):
        check(name in targets, 'meson install does not install %s: %s' % (name, sorted(targets)))
    check(os.path.dirname(targets['ptscope-fleet']) == os.path.dirname(targets['pt-decode']),
          'ptscope-fleet and pt-decode are installed apart')
    launcher = os.path.join(a.build_dir, 'tools', 'fleet', 'ptscope-fleet.installed')
    with open(launcher) as f:
        text = f.read()
    # Its paths are relative to its own directory (a relocatable tree): resolved there, they
    # must be the installed pt-decode and package.
    here = os.path.dirname(targets['ptscope-fleet'])
    resolved = [os.path.normpath(os.path.join(here, path))
                for path in re.findall(r"os\.path\.join\(_HERE, '([^']*)'\)", text)]
    check(targets['pt-decode'] in resolved, 'the installed launcher does not run %s: %s' %
          (targets['pt-decode'], resolved))
    check(os.path.dirname(os.path.dirname(targets['cli.py'])) in resolved,
          'the installed launcher does not import the installed package: %s' % resolved)


def main():
    p = argparse.ArgumentParser()
    for option in ('--fleet', '--decode', '--emulate', '--synth', '--synth-binary', '--build-dir'):
        p.add_argument(option, required=True)
    p.add_argument('--program', action='append', default=[])
    a = p.parse_args()
    programs = dict(item.split('=', 1) for item in a.program)
    os.environ.pop('DEBUGINFOD_URLS', None)  # nothing is fetched unless a test says where from
    require_tools(a.fleet, a.decode, a.emulate, a.synth, *programs.values())
    tmp = tempfile.mkdtemp(prefix='ptscope-fleet-local-')
    try:
        arch = os.path.join(tmp, 'arch')
        os.makedirs(arch)
        emulate(a.emulate, programs['calls'], os.path.join(arch, 'calls.ptar'))
        emulate(a.emulate, programs['recursion'], os.path.join(arch, 'recursion.ptar'))
        manifest = os.path.join(tmp, 'manifest.txt')
        with open(manifest, 'w') as f:
            f.write('# one line, relative to this file\narch/recursion.ptar\n')
        ref = os.path.join(tmp, 'ref')
        for name in ('calls', 'recursion'):
            statuses, _ = reference(a.decode, os.path.join(arch, name + '.ptar'), ref, name)
            check(statuses == [0, 0], 'pt-decode alone on %s: %s' % (name, statuses))
            r = run([a.decode, '--format', 'text', '-j1', '-o', os.path.join(ref, name + '.txt'),
                     os.path.join(arch, name + '.ptar')])
            check(r.returncode == 0, 'pt-decode --format text: %s' % r.stderr)
        for trace, suffix in (('perfetto', '.pftrace'), ('text', '.txt')):
            out = os.path.join(tmp, 'out-' + trace)
            r, outcomes = fleet(a.fleet, [os.path.join(arch, 'c*.ptar')], out,
                                os.path.join(tmp, 'report-%s.json' % trace),
                                ['--manifest', manifest, '--format', trace,
                                 '--local-workers', '2'])
            check(r.returncode == 0, 'local %s: exit %d: %s' % (trace, r.returncode, r.stderr))
            check(sorted(outcomes) == ['calls.ptar', 'recursion.ptar'],
                  'local %s: archives %s' % (trace, sorted(outcomes)))
            for name in ('calls', 'recursion'):
                check(outcomes[name + '.ptar']['state'] == 'decoded',
                      'local: %s not decoded' % name)
                for f in (name + '.summary.json', name + suffix):
                    check(same_bytes(os.path.join(out, f), os.path.join(ref, f)),
                          'local %s: %s differs from pt-decode alone' % (trace, f))
                check(('/%s.ptar decoded, ' % name) in r.stderr,
                      'local: no log line for %s: %s' % (name, r.stderr))
            check('Dask dashboard: http://127.0.0.1:' in r.stderr,
                  'local: no dashboard address: %s' % r.stderr)
        terminal_progress(a, tmp, [os.path.join(arch, n + '.ptar') for n in ('calls', 'recursion')])
        usage_errors(a, tmp)
        interrupted(a, tmp)
        installed(a)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    main_guard(main)
