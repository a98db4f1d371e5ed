#!/usr/bin/env python3
"""perf_damage.py PT_EMULATE PT_ARCHIVE PT_DECODE PROGRAM: a damaged perf.data end to end.

A pt-emulate capture of PROGRAM is exported as a perf.data (`pt-archive export-perf`), then
damaged: one byte flipped (xor 0xff) at every offset of the file header, the attr section and
every record header, and every 9th offset elsewhere (the trace bytes, record bodies, features);
and cut at every 17th offset (a capture of PROGRAM exports to ~2.6 KB). Each damaged file goes through `pt-decode --format insns` and
`pt-archive import-perf` (whose archive is decoded again). perf.data has no checksums, so a flip
may go unnoticed (exit 0); what every run must do:
  - end by itself within 30 s (no hang) with 0, 1 or 3 (never a signal, never 2);
  - exit 1 only with a message that names the file and where (an offset, or the header field,
    or "no PT data"/nothing to decode, or the metadata key whose value is bad, or, for a flipped
    mapping, which code was not found),
    never an empty or unlocated one;
  - exit 3 only with a note that says what was lost;
and the peak memory of any run stays under 1 GiB.
"""
import os
import re
import resource
import struct
import subprocess
import sys
import tempfile

FAILURES = []
# Where reading stopped, or (a flipped address or file name in a mapping record reads as a
# mapping elsewhere: nothing to check it against) which code was not found.
LOCATED = re.compile(r'offset \d+|byte \d+|at \d+|header|attr|feature|section|no PT|nothing|'
                     r'not a perf\.data|magic|holds no|executed code was not found|metadata \S+=',
                     re.IGNORECASE)


def fail(msg):
    FAILURES.append(msg)
    print('FAIL:', msg)


def run(cmd, what):
    try:
        # errors='replace': a damaged file name is printed as the file has it
        r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=False,
                           timeout=30, errors='replace')
    except subprocess.TimeoutExpired:
        fail(f'{what}: {os.path.basename(str(cmd[0]))} still running after 30 s (a hang)')
        return None
    if r.returncode < 0:
        fail(f'{what}: {os.path.basename(str(cmd[0]))} died of signal {-r.returncode}: '
             f'{r.stderr[-300:]}')
        return None
    return r


def judge(r, what, path):
    """Checks one run's exit status and message; returns the status (None when it failed)."""
    if r is None:
        return None
    if r.returncode not in (0, 1, 3):
        fail(f'{what}: exit {r.returncode}: {r.stderr[-300:]}')
        return None
    if r.returncode == 1:
        if os.path.basename(path) not in r.stderr or not LOCATED.search(r.stderr):
            fail(f'{what}: exit 1 without naming the file and where: {r.stderr[-300:]!r}')
    if r.returncode == 3 and not r.stderr.strip():
        fail(f'{what}: exit 3 (partial) without saying what was lost')
    return r.returncode


def records(data):
    """(offset, size) of each record header of the data section (format/PERF_DATA.md §4)."""
    off, size = struct.unpack_from('<QQ', data, 40)
    out, at = [], off
    while at + 8 <= off + size:
        rtype, _, rsize = struct.unpack_from('<IHH', data, at)
        if rsize < 8:
            break
        out.append(at)
        at += rsize + (struct.unpack_from('<Q', data, at + 8)[0] if rtype == 71 else 0)
    return out


def main():
    pt_emulate, pt_archive, pt_decode, program = sys.argv[1:5]
    with tempfile.TemporaryDirectory(prefix='perf_damage_') as work:
        ptar, data_path = os.path.join(work, 'c.ptar'), os.path.join(work, 'c.data')
        r = subprocess.run([pt_emulate, '--full', '--start-at', 'main', '-o', ptar, '--',
                            program], capture_output=True, text=True, check=False)
        if r.returncode != 0:
            print(f'FAIL: pt-emulate: {r.stderr}')
            return 1
        r = subprocess.run([pt_archive, 'export-perf', ptar, '-o', data_path],
                           capture_output=True, text=True, check=False)
        if r.returncode != 0:
            print(f'FAIL: export-perf: {r.stderr}')
            return 1
        data = open(data_path, 'rb').read()
        attrs_off, attrs_size = struct.unpack_from('<QQ', data, 16)
        exact = set(range(0, 104)) | set(range(attrs_off, attrs_off + attrs_size))
        for at in records(data):
            exact |= set(range(at, at + 8))
        flips = sorted(o for o in exact | set(range(0, len(data), 9)) if o < len(data))
        cuts = list(range(1, len(data), 17))
        damaged = os.path.join(work, 'damaged.data')
        out, imported = os.path.join(work, 'out.insns'), os.path.join(work, 'imported.ptar')
        status = {}
        for kind, offsets in (('flip', flips), ('cut', cuts)):
            for at in offsets:
                body = bytearray(data[:at] if kind == 'cut' else data)
                if kind == 'flip':
                    body[at] ^= 0xff
                with open(damaged, 'wb') as f:
                    f.write(body)
                what = f'{kind} at {at}'
                rc = judge(run([pt_decode, '--format', 'insns', '-o', out, damaged],
                               f'{what}: pt-decode'), f'{what}: pt-decode', damaged)
                status[('decode', kind, rc)] = status.get(('decode', kind, rc), 0) + 1
                rc = judge(run([pt_archive, 'import-perf', damaged, '-o', imported],
                               f'{what}: import-perf'), f'{what}: import-perf', damaged)
                status[('import', kind, rc)] = status.get(('import', kind, rc), 0) + 1
                if rc in (0, 3) and os.path.exists(imported):
                    again = judge(run([pt_decode, '--format', 'insns', '-o', out, imported],
                                      f'{what}: pt-decode of the import'),
                                  f'{what}: pt-decode of the import', imported)
                    if rc == 3 and again == 0:
                        fail(f'{what}: import-perf said partial, its archive decodes as complete')
                for path in (out, imported):
                    if os.path.exists(path):
                        os.unlink(path)
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        if peak > 1024 * 1024:
            fail(f'a run peaked at {peak} KiB, over 1 GiB')
        print(f'{len(data)}-byte perf.data: {len(flips)} flips, {len(cuts)} cuts; peak {peak} KiB')
        for key in sorted(status, key=str):
            print(f'  {key[0]} {key[1]}: exit {key[2]}: {status[key]}')
        for tool in ('decode', 'import'):
            if not any(status.get((tool, kind, 3)) for kind in ('flip', 'cut')):
                fail(f'no damaged file gave {tool} a partial result (exit 3): is damage seen?')
    print(f'{len(FAILURES)} failures')
    return 1 if FAILURES else 0


if __name__ == '__main__':
    sys.exit(main())
