#!/usr/bin/env python3
"""perf_salvage.py PT_EMULATE PT_ARCHIVE PT_DECODE PROGRAM: perf.data salvage against perf.

A pt-emulate capture of PROGRAM is exported as a perf.data, then cut at every record boundary of
its data section, inside every record header, every 48 bytes of every AUXTRACE record's trace
bytes, and inside its feature sections. For each cut:
  - Linux perf (`perf script --itrace=i1i -F tid,ip`) decodes what is complete;
  - pt-decode --format insns on the cut file must decode a prefix of what perf decodes from the
    whole file; where perf decodes the cut file, the same instructions (the sequences may
    end a few instructions apart: at an abrupt end of the trace the two decoders stop walking at
    different points; a common prefix of the shorter one is required, and at most 64 more).
    perf also walks on the TNT bits of the packet the cut split (a long TNT cut after 2 of its 6
    payload bytes, its stop bit guessed): where perf decodes more, pt-decode must decode at least
    what perf decodes from the file cut 16 bytes earlier (no packet but a PSB is longer), with
    the same 64 of slack: pt-decode reads whole packets only;
  - pt-decode exits 3 and names the offset where reading stopped, or exits 1 when nothing before
    the cut holds trace; a cut past the data section (features lost) decodes everything, exit 3;
  - pt-archive import-perf exits 3, and the archive it writes decodes to the same instructions
    and still reads as partial (exit 3).
The records are found by walking the file here (format/PERF_DATA.md §4), apart from the reader.
Exit 77 when perf is missing.
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile

FAILURES = []


def fail(msg):
    FAILURES.append(msg)
    print('FAIL:', msg)


def run(cmd, timeout=120):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=False,
                          timeout=timeout)


def perf_ips(path):
    """perf's instructions, or None when perf does not finish: perf 6.1 loops forever on a file
    cut at a record boundary before its first AUXTRACE record, or inside or right after an
    AUXTRACE record with another after it in the whole file (that is perf's bug)."""
    try:  # perf takes 0.1 s on these files when it finishes
        r = run(['perf', 'script', '-i', path, '--itrace=i1i', '-F', 'tid,ip'], timeout=4)
    except subprocess.TimeoutExpired:
        return None
    return [int(line.split()[1], 16) for line in r.stdout.splitlines() if len(line.split()) == 2]


def decode_ips(pt_decode, path, out):
    r = run([pt_decode, '--format', 'insns', '-o', out, path])
    ips = []
    if os.path.exists(out):
        with open(out) as f:
            ips = [int(line.split()[1], 16) for line in f if len(line.split()) == 2]
        os.unlink(out)
    return r, ips


def records(data):
    """(offset, type, end) of each record of the data section; AUXTRACE ends after its trace."""
    off, size = struct.unpack_from('<QQ', data, 40)
    out, at = [], off
    while at < off + size:
        rtype, _, rsize = struct.unpack_from('<IHH', data, at)
        end = at + rsize + (struct.unpack_from('<Q', data, at + 8)[0] if rtype == 71 else 0)
        out.append((at, rtype, rsize, end))
        at = end
    return off, off + size, out


def compare(what, perf, ours, perf_before_split_packet):
    n = min(len(perf), len(ours))
    if perf[:n] != ours[:n]:
        first = next(i for i in range(n) if perf[i] != ours[i])
        fail(f'{what}: pt-decode and perf differ at instruction {first}: '
             f'{ours[first]:#x} vs {perf[first]:#x}')
    elif len(ours) + 64 < len(perf):
        earlier = perf_before_split_packet()
        if earlier is None or len(ours) + 64 < len(earlier):
            fail(f'{what}: pt-decode decoded {len(ours)} instructions, perf {len(perf)} '
                 f'({None if earlier is None else len(earlier)} 16 bytes before the cut)')


def main():
    pt_emulate, pt_archive, pt_decode, program = sys.argv[1:5]
    if shutil.which('perf') is None:
        print('perf not installed: skipped')
        return 77
    with tempfile.TemporaryDirectory(prefix='perf_salvage_') as work:
        ptar, data_path = os.path.join(work, 'c.ptar'), os.path.join(work, 'c.data')
        r = run([pt_emulate, '--full', '--start-at', 'main', '-o', ptar, '--', program])
        if r.returncode != 0:
            fail(f'pt-emulate: {r.stderr}')
            return 1
        r = run([pt_archive, 'export-perf', ptar, '-o', data_path])
        if r.returncode != 0:
            fail(f'export-perf: {r.stderr}')
            return 1
        data = open(data_path, 'rb').read()
        data_off, data_end, recs = records(data)
        whole = perf_ips(data_path)
        if not whole:
            fail('perf decodes nothing from the whole file')
        first_trace = next(at + rsize for at, t, rsize, _ in recs if t == 71)
        cuts = set()
        for at, rtype, rsize, end in recs:
            cuts.update({at, at + 4})
            if rtype == 71:  # every 48 bytes of its trace
                cuts.update(range(at + rsize + 1, end, 48))
        cuts.update({data_end, data_end + 8, (data_end + len(data)) // 2})
        cut_path, out = os.path.join(work, 'cut.data'), os.path.join(work, 'cut.insns')
        checked = decoded = hung = against_perf = 0
        for cut in sorted(c for c in cuts if data_off < c < len(data)):
            with open(cut_path, 'wb') as f:
                f.write(data[:cut])
            r, ours = decode_ips(pt_decode, cut_path, out)
            what = f'cut at {cut}'
            if cut <= first_trace:  # no trace bytes before the cut
                if r.returncode != 1:
                    fail(f'{what}: nothing to decode, but exit {r.returncode}: {r.stderr}')
                continue
            checked += 1
            want_rc = 3 if ours else 1  # 1: nothing decodable yet (no PSB before the cut)
            if r.returncode != want_rc:
                fail(f'{what}: exit {r.returncode}, want {want_rc}: {r.stderr}')
            where = f'offset {cut}' if cut < data_end else 'left out'
            if cut < data_end and not any(f'offset {at}' in r.stderr for at in
                                          [cut] + [a for a, _, _, _ in recs] + [40]):
                fail(f'{what}: the report names no offset: {r.stderr}')
            if cut >= data_end and where not in r.stderr:
                fail(f'{what}: lost features not reported: {r.stderr}')
            # Never an instruction the whole file does not have there (nothing past the cut is
            # made up), whatever perf does with the cut file.
            if ours != whole[:len(ours)]:
                fail(f'{what}: pt-decode\'s {len(ours)} instructions do not begin perf\'s '
                     f'of the whole file')
            perf = perf_ips(cut_path)
            if not perf:
                # perf 6.1 loops forever on a file that ends inside or right after an AUXTRACE
                # record that is not the last one written, or decodes nothing from it.
                hung += 1
            else:
                against_perf += 1
                def perf_before_split_packet(cut=cut):
                    earlier_path = os.path.join(work, 'earlier.data')
                    with open(earlier_path, 'wb') as f:
                        f.write(data[:cut - 16])
                    return perf_ips(earlier_path)
                compare(what, perf, ours, perf_before_split_packet)
            if cut >= data_end and ours != decode_ips(pt_decode, data_path, out)[1]:
                fail(f'{what}: features cut, but the trace did not decode whole')
            if not ours:
                continue
            decoded += 1
            imported = os.path.join(work, 'imported.ptar')
            r = run([pt_archive, 'import-perf', cut_path, '-o', imported])
            if r.returncode != 3:
                fail(f'{what}: import-perf exit {r.returncode}, want 3: {r.stderr}')
                continue
            r, again = decode_ips(pt_decode, imported, out)
            if r.returncode != 3 or again != ours or 'imported from' not in r.stderr:
                fail(f'{what}: the imported archive: exit {r.returncode}, '
                     f'{len(again)} instructions (want 3, {len(ours)}): {r.stderr}')
        print(f'{checked} cuts with trace checked, {against_perf} against perf on the cut file, '
              f'{hung} (perf looping or decoding nothing) against perf on the whole file; {decoded} decoded some '
              f'({len(whole)} instructions whole)')
        if checked < 10 or decoded < 5 or against_perf < 1:
            fail(f'only {checked} cuts had trace before them, {decoded} decoded some, '
                 f'{against_perf} compared with perf on the cut file')
    print(f'{len(FAILURES)} failures')
    return 1 if FAILURES else 0


if __name__ == '__main__':
    sys.exit(main())
