#!/usr/bin/env python3
"""perf_e2e.py: perf.data interoperability checked against Linux perf and the libipt oracle.

Usage: perf_e2e.py PT_ARCHIVE KNOWN_LOOP MAKE_KNOWN_ARCHIVE IPT_INSNS SRCDIR

known_loop's instruction sequence is fixed by construction (known_loop.expected, labels turned
into addresses with nm). Three independent producers must all decode to it:
  * make_perf_data.py (hand-encoded PT in a hand-built perf.data)  -> perf script, and
    pt-archive import-perf -> ipt_insns (libipt);
  * make_known_archive (libipt-encoded PT in a .ptar) -> pt-archive export-perf -> perf script,
    and -> import-perf again -> ipt_insns (round trip);
then bad inputs must give exact one-line errors.
"""
import os
import pathlib
import random
import shutil
import stat
import struct
import subprocess
import sys
import tempfile

FAILURES = []


def fail(msg):
    FAILURES.append(msg)
    print('FAIL: ' + msg, file=sys.stderr)


def run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=False, **kw)


def expected_lines(known_loop, srcdir, tid):
    nm = run(['nm', known_loop]).stdout.split()
    addr = {nm[i + 2]: int(nm[i], 16) for i in range(0, len(nm) - 2, 3)}
    labels = (srcdir / 'known_loop.expected').read_text().split()
    return [f'{tid} 0x{addr[label]:x}' for label in labels]


def perf_insns(data):
    """`perf script --itrace=i1i -F tid,ip` normalised to 'TID 0xADDR' lines."""
    r = run(['perf', 'script', '-i', data, '--itrace=i1i', '-F', 'tid,ip'])
    if r.returncode != 0:
        fail(f'perf script -i {data}: rc {r.returncode}: {r.stderr.strip()}')
    out = []
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) == 2:
            out.append(f'{f[0]} 0x{int(f[1], 16):x}')
    return out


def check_equal(what, got, want):
    if got != want:
        fail(f'{what}: got {len(got)} lines, want {len(want)}\n  got:  {got[:25]}\n  want: {want[:25]}')


def check_known(pt_archive, known_loop, make_known, ipt, srcdir, work):
    # 1. independent writer -> perf, and -> our reader -> libipt
    for timed in (False, True):
        tag = 'timed' if timed else 'untimed'
        data = work / f'py-{tag}.data'
        cmd = [sys.executable, srcdir / 'make_perf_data.py', '--binary', known_loop, '--out', data]
        subprocess.run([str(c) for c in cmd + (['--timed'] if timed else [])], check=True)
        want = expected_lines(known_loop, srcdir, 4242)
        check_equal(f'perf script on make_perf_data.py {tag}', perf_insns(data), want)
        ptar = work / f'py-{tag}.ptar'
        r = run([pt_archive, 'import-perf', data, '-o', ptar])
        if r.returncode != 0:
            fail(f'import-perf {data}: {r.stderr.strip()}')
            continue
        check_equal(f'ipt_insns on imported make_perf_data.py {tag}',
                    run([ipt, ptar]).stdout.splitlines(), want)

    # 1b. a perf-record-shaped per-CPU file (two attrs, ID_INDEX, FINISHED_ROUND, unknown
    # features): perf decodes it, and so does perf after our import + re-export, which needs the
    # SWITCH_CPU_WIDE sideband and the per-CPU stream to survive the import.
    data, again = work / 'py-cpu.data', work / 'py-cpu-again.data'
    subprocess.run([sys.executable, str(srcdir / 'make_perf_data.py'), '--binary', str(known_loop),
                    '--out', str(data), '--per-cpu'], check=True)
    want = expected_lines(known_loop, srcdir, 4242)
    check_equal('perf script on make_perf_data.py --per-cpu', perf_insns(data), want)
    r = run([pt_archive, 'import-perf', data, '-o', work / 'py-cpu.ptar'])
    r2 = run([pt_archive, 'export-perf', work / 'py-cpu.ptar', '-o', again])
    if r.returncode or r2.returncode:
        fail(f'per-CPU import/export: {r.stderr.strip()} {r2.stderr.strip()}')
    else:
        check_equal('perf script after per-CPU import + export', perf_insns(again), want)

    # 2. libipt-encoded archive -> our writer -> perf; and round trip -> libipt
    for timed in (False, True):
        tag = 'timed' if timed else 'untimed'
        ptar = work / f'known-{tag}.ptar'
        subprocess.run([str(make_known), known_loop, ptar] + (['--timed'] if timed else []), check=True)
        want = expected_lines(known_loop, srcdir, 4243)
        check_equal(f'ipt_insns on make_known_archive {tag}', run([ipt, ptar]).stdout.splitlines(), want)
        data = work / f'known-{tag}.data'
        data.write_bytes(b'old')
        os.chmod(data, 0o644)
        r = run([pt_archive, 'export-perf', ptar, '-o', data])
        if r.returncode != 0:
            fail(f'export-perf {ptar}: {r.stderr.strip()}')
            continue
        mode = stat.S_IMODE(os.stat(data).st_mode)
        if mode != 0o600:
            fail(f'export-perf wrote {data} with mode {mode:o}, want 600')
        check_equal(f'perf script on export-perf {tag}', perf_insns(data), want)
        back = work / f'known-{tag}-back.ptar'
        r = run([pt_archive, 'import-perf', data, '-o', back])
        if r.returncode != 0:
            fail(f'import-perf {data}: {r.stderr.strip()}')
            continue
        check_equal(f'ipt_insns after round trip {tag}', run([ipt, back]).stdout.splitlines(), want)
        embedded = work / f'known-{tag}-embedded.ptar'
        r = run([pt_archive, 'import-perf', data, '-o', embedded, '--embed-binaries'])
        info = run([pt_archive, 'info', embedded]).stdout
        if r.returncode != 0 or 'embedded-binaries' not in info or r.stderr.count('warning'):
            fail(f'import-perf --embed-binaries {data}: rc {r.returncode}: {r.stderr.strip()}')
        check_branches(data, known_loop, timed)

    # 3. per-CPU: the trace sits in a CPU 1 stream; only the SWITCH_CPU_WIDE sideband tells perf
    # which thread ran, so the right tid proves the switch record survived the export.
    ptar, data = work / 'known-cpu.ptar', work / 'known-cpu.data'
    subprocess.run([str(make_known), known_loop, ptar, '--per-cpu'], check=True)
    r = run([pt_archive, 'export-perf', ptar, '-o', data])
    if r.returncode != 0:
        fail(f'export-perf {ptar}: {r.stderr.strip()}')
    else:
        check_equal('perf script on per-CPU export-perf', perf_insns(data),
                    expected_lines(known_loop, srcdir, 4243))


def check_branches(data, known_loop, timed):
    """The branch view magic-trace uses, and -F +addr (needs the AUXTRACE index feature)."""
    # perf cannot print 'time' for an untimed (no TSC) capture: it refuses the whole run.
    fields = 'pid,tid,' + ('time,' if timed else '') + 'flags,ip,addr,sym,symoff,synth,dso,event,period'
    r = run(['perf', 'script', '-i', data, '--itrace=bep', '--ns', '-F', fields])
    calls = sum(' call ' in line for line in r.stdout.splitlines())
    rets = sum(' return ' in line for line in r.stdout.splitlines())
    if r.returncode != 0 or calls != 3 or rets != 3 or 'tr strt' not in r.stdout:
        fail(f'perf script --itrace=bep on {data}: rc {r.returncode}, {calls} calls, {rets} returns')
    r = run(['perf', 'script', '-i', data, '--itrace=be', '-F', '+addr'])
    if r.returncode != 0 or sum(' f00+0x0 ' in line for line in r.stdout.splitlines()) != 3:
        fail(f'perf script -F +addr on {data}: rc {r.returncode}: {r.stderr.strip()[:200]}')
    if timed:
        r = run(['perf', 'script', '-i', data, '--itrace=i1i', '-F', 'time', '--ns'])
        times = set(line.strip() for line in r.stdout.splitlines())
        if times != {'0.000004096:'}:   # TSC 0x1000 at 1 GHz virtual clock
            fail(f'timed export: perf times {sorted(times)[:5]}, want 0.000004096')


def check_errors(pt_archive, work, good):
    def expect(path, want):
        r = run([pt_archive, 'import-perf', path, '-o', work / 'err.ptar'])
        got = r.stderr.strip()
        if r.returncode != 1 or got != want:
            fail(f'import-perf {path}: rc {r.returncode}\n  got:  {got}\n  want: {want}')

    raw = good.read_bytes()
    data_off, data_size = struct.unpack_from('<QQ', raw, 40)
    for n in (0, 12, 50, 200, data_off + 20):
        cut = work / f'cut{n}.data'
        cut.write_bytes(raw[:n])
        want = {
            0: f'{cut}: offset 0: file is 0 bytes, too short for a perf.data header',
            12: f'{cut}: offset 0: file is 12 bytes, too short for a perf.data header',
            50: f'{cut}: offset 50: file is 50 bytes, shorter than the 104-byte perf.data header; '
                'the file is truncated',
            200: f'{cut}: offset 24: the attrs section [112, +144) runs past the end of the file '
                 '(200 bytes); the file is truncated',
            # Cut inside the first record (AUXTRACE_INFO): nothing before it to salvage.
            data_off + 20: f'{cut}: offset {data_off}: record type 70 of 152 bytes runs past the '
                           'end of the data: the file is truncated; no Intel PT data before it (no '
                           'AUXTRACE_INFO record)',
        }[n]
        expect(cut, 'pt-archive: ' + want)
    # Cut in the feature table: every record is there, so it imports, partial (exit 3), naming
    # what was left out (perf_salvage.py checks cuts everywhere against perf script).
    cut = work / 'cut-features.data'
    cut.write_bytes(raw[:data_off + data_size + 4])
    r = run([pt_archive, 'import-perf', cut, '-o', work / 'features.ptar'])
    want = (f'pt-archive: {cut}: damaged [{data_off + data_size:#x}, {data_off + data_size + 4:#x}): '
            f'offset {data_off + data_size}: the feature section table runs past the end of the '
            'file at feature 2: the file is truncated; the features from there on are left out; '
            'imported what came before')
    if r.returncode != 3 or r.stderr.strip().splitlines()[-1] != want:
        fail(f'import-perf {cut}: rc {r.returncode}\n  got:  {r.stderr.strip()}\n  want: {want}')
    junk = work / 'random.data'
    junk.write_bytes(bytes(random.Random(6).randrange(256) for _ in range(4096)))
    expect(junk, f"pt-archive: {junk}: offset 0: not a perf.data file (magic is not 'PERFILE2')")
    # Real perf outputs: pipe mode, and a capture without intel_pt (a software event).
    pipe = work / 'pipe.data'
    with open(pipe, 'wb') as out:
        subprocess.run(['perf', 'record', '-q', '-e', 'dummy', '-o', '-', 'true'], stdout=out,
                       stderr=subprocess.DEVNULL, check=False)
    expect(pipe, f"pt-archive: {pipe}: offset 8: pipe-mode perf.data (header size 16) is not "
                 "supported; record to a file with 'perf record -o FILE' instead of a pipe")
    dummy = work / 'dummy.data'
    run(['perf', 'record', '-q', '-e', 'dummy', '-o', dummy, 'true'])
    if dummy.exists():
        off = struct.unpack_from('<Q', dummy.read_bytes(), 40)[0]
        expect(dummy, f"pt-archive: {dummy}: offset {off}: no Intel PT data in this perf.data (no "
                      "AUXTRACE_INFO record in the data section); record with 'perf record -e "
                      "intel_pt//u'")
    else:
        fail('perf record -e dummy did not produce a file')
    expect(work / 'missing.data',
           f'pt-archive: {work}/missing.data: cannot open: No such file or directory')
    r = run([pt_archive, 'export-perf', work / 'known-timed.ptar', '-o', work / 'no-dir' / 'x.data'])
    want = (f'pt-archive: {work}/no-dir/x.data: cannot create a temporary file in {work}/no-dir: '
            'No such file or directory')
    if r.returncode != 1 or r.stderr.strip() != want:
        fail(f'export-perf to a missing directory: rc {r.returncode}: {r.stderr.strip()}')


def main():
    pt_archive, known_loop, make_known, ipt, srcdir = sys.argv[1:6]
    if shutil.which('perf') is None:
        print('FAIL: perf is not installed: this test checks against Linux perf\'s own decoder; '
              'scripts/setup installs it (Debian package linux-perf)', file=sys.stderr)
        return 1
    srcdir = pathlib.Path(srcdir)
    with tempfile.TemporaryDirectory(prefix='perf_e2e_') as tmp:
        work = pathlib.Path(tmp)
        check_known(pt_archive, known_loop, make_known, ipt, srcdir, work)
        check_errors(pt_archive, work, work / 'known-timed.data')
    print(f'{len(FAILURES)} failures')
    return 1 if FAILURES else 0


if __name__ == '__main__':
    sys.exit(main())
