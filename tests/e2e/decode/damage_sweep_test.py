#!/usr/bin/env python3
"""damage_sweep_test.py PT_EMULATE PT_ARCHIVE PT_DECODE PROGRAM: archives that survive damage.

A pt-emulate capture of PROGRAM (a multi-thread program) is rewritten into many small chunks, as
a recorder that writes as it goes produces them: the sideband first, one record per chunk, then
each thread's PT cut at its PSBs, the threads' pieces interleaved (format/FORMAT.md). Then:

- a byte is flipped in each chunk in turn: pt-archive verify lists exactly that chunk's range
  and exits 3; pt-decode exits 3, names the range, and decodes every other chunk's data: the
  threads whose PT is elsewhere decode exactly as the whole archive does, and the thread that lost
  a piece decodes the whole archive's instructions with one stretch cut out (at a gap); a lost
  sideband record or other chunk leaves each thread a subsequence of its whole decode;
- the archive is cut at every chunk boundary and inside every chunk: pt-decode decodes exactly
  what an intact archive of the chunks before the cut decodes, and exits 3 (1 when nothing before
  the cut decodes).
Instructions are compared as `pt-decode --format insns` lists them: TID and address, per thread.
"""
import collections
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'support'))
import ptar_edit  # noqa: E402

METADATA, PT_DATA, SIDEBAND, END = 1, 2, 4, 15
PSB = bytes([0x02, 0x82]) * 8
FAILURES = []


def fail(msg):
    FAILURES.append(msg)
    print('FAIL:', msg)


def run(cmd):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300)


def decode(pt_decode, archive, work):
    """(exit status, stderr, {tid: [address, ...]})"""
    out = os.path.join(work, 'out.insns')
    r = run([pt_decode, '--format', 'insns', '--jobs', '1', '-o', out, archive])
    threads = collections.defaultdict(list)
    if os.path.exists(out):
        with open(out) as f:
            for line in f:
                fields = line.split()
                if len(fields) == 2 and fields[1].startswith('0x'):
                    threads[int(fields[0])].append(int(fields[1], 16))
        os.unlink(out)
    return r.returncode, r.stderr, dict(threads)


def split_sideband(payload):
    """One Sideband chunk per perf record."""
    attr_id, cpu, size = struct.unpack_from('<IiQ', payload, 0)
    records, out, at = payload[16:16 + size], [], 0
    while at < len(records):
        rsize = struct.unpack_from('<H', records, at + 6)[0]
        out.append(struct.pack('<IiQ', attr_id, cpu, rsize) + records[at:at + rsize])
        at += rsize
    return out


def split_pt(payload):
    """The pieces of one PtData chunk, cut at each PSB, as PtData payloads."""
    fields = payload[:48]
    stream_offset = struct.unpack_from('<Q', fields, 16)[0]
    size = struct.unpack_from('<Q', payload, 48)[0]
    data = payload[56:56 + size]
    cuts = [0] + [i for i in range(1, len(data)) if data[i:i + len(PSB)] == PSB] + [len(data)]
    pieces = []
    for begin, end in zip(cuts, cuts[1:]):
        head = bytearray(fields)
        struct.pack_into('<Q', head, 16, stream_offset + begin)
        pieces.append(bytes(head) + struct.pack('<Q', end - begin) + data[begin:end])
    return pieces


def rechunk(src, dst):
    """Writes DST from SRC as described above; returns [(type, payload, stream id or None)]."""
    header, chunks = ptar_edit.read_chunks(src)
    first, streams = [], collections.OrderedDict()
    for ctype, payload in chunks:
        if ctype == SIDEBAND:
            first += [(SIDEBAND, p, None) for p in split_sideband(payload)]
        elif ctype == PT_DATA:
            sid = struct.unpack_from('<I', payload, 0)[0]
            streams.setdefault(sid, []).extend(split_pt(payload))
        elif ctype != END:
            first.append((ctype, payload, None))
    pt = []
    while any(streams.values()):  # round robin over the threads, as they run
        for sid, pieces in streams.items():
            if pieces:
                pt.append((PT_DATA, pieces.pop(0), sid))
    out = first + pt
    out.append((END, struct.pack('<Q', len(out)), None))
    return header, out


def is_subsequence(part, whole):
    it = iter(whole)
    return all(any(x == y for y in it) for x in part)


def cut_out(part, whole):
    """Whether PART is WHOLE with one contiguous stretch removed (possibly empty)."""
    n = 0
    while n < len(part) and n < len(whole) and part[n] == whole[n]:
        n += 1
    rest = len(part) - n
    return rest <= len(whole) - n and part[n:] == whole[len(whole) - rest:]


def main():
    pt_emulate, pt_archive, pt_decode, program = sys.argv[1:5]
    with tempfile.TemporaryDirectory(prefix='damage_sweep_') as work:
        raw = os.path.join(work, 'raw.ptar')
        r = run([pt_emulate, '--full', '--psb-period', '512', '-o', raw, '--', program])
        if r.returncode != 0:
            fail(f'pt-emulate: {r.stderr}')
            return 1
        archive = os.path.join(work, 'small-chunks.ptar')
        header, chunks = rechunk(raw, archive)
        spans = ptar_edit.write_chunks(archive, header, [(t, p) for t, p, _ in chunks])
        code, err, whole = decode(pt_decode, archive, work)
        _, _, original = decode(pt_decode, raw, work)
        if code != 0 or whole != original or len(whole) < 2:
            fail(f'the rewritten archive decodes differently (exit {code}, {len(whole)} threads): '
                 f'{err}')
            return 1
        pt_chunks = sum(1 for t, _, _ in chunks if t == PT_DATA)
        print(f'{len(chunks)} chunks ({pt_chunks} PT pieces of {len(whole)} threads)')
        tid_of = {}  # stream id -> tid (PtData payload offset 12)
        for t, p, sid in chunks:
            if t == PT_DATA:
                tid_of[sid] = struct.unpack_from('<I', p, 12)[0]

        with open(archive, 'rb') as f:
            data = f.read()
        flipped = os.path.join(work, 'flipped.ptar')
        for k, ((ctype, payload, sid), (start, end)) in enumerate(zip(chunks, spans)):
            bad = bytearray(data)
            bad[start + 32 + len(payload) // 2] ^= 0x10
            with open(flipped, 'wb') as f:
                f.write(bad)
            what = f'chunk {k} (type {ctype}) flipped'
            r = run([pt_archive, 'verify', flipped])
            want_range = f'damaged [{start:#x}, {end:#x})'
            if r.returncode != 3 or r.stdout.count('  damaged [') != 1 or want_range not in r.stdout:
                fail(f'{what}: verify exit {r.returncode}, want 3 and {want_range}: {r.stdout}')
            code, err, got = decode(pt_decode, flipped, work)
            want_code = 3 if any(got.values()) else 1
            if code != want_code or want_range not in err:
                fail(f'{what}: pt-decode exit {code} (want {want_code}), range named: '
                     f'{want_range in err}: {err[-500:]}')
            for tid, insns in whole.items():
                mine = got.get(tid, [])
                if ctype == PT_DATA and tid == tid_of[sid]:
                    ok = cut_out(mine, insns) and len(mine) < len(insns)
                elif ctype == PT_DATA or ctype == END:
                    ok = mine == insns
                else:
                    ok = is_subsequence(mine, insns)
                if not ok:
                    fail(f'{what}: thread {tid}: {len(mine)} instructions, not what the intact '
                         f'chunks hold (whole: {len(insns)})')

        cut = os.path.join(work, 'cut.ptar')
        clean = os.path.join(work, 'clean.ptar')
        cuts = [(spans[k][1], k + 1) for k in range(len(spans) - 1)]
        cuts += [((s + e) // 2, k) for k, (s, e) in enumerate(spans)]
        for at, kept in sorted(cuts):
            with open(cut, 'wb') as f:
                f.write(data[:at])
            ptar_edit.write_chunks(clean, header, [(t, p) for t, p, _ in chunks[:kept]] +
                                   [(END, struct.pack('<Q', kept))])
            code, err, got = decode(pt_decode, cut, work)
            _, _, want = decode(pt_decode, clean, work)
            want = {tid: insns for tid, insns in want.items() if insns}
            got = {tid: insns for tid, insns in got.items() if insns}
            want_code = 3 if got else 1
            if code != want_code or got != want:
                fail(f'cut at {at} ({kept} chunks before it): exit {code} (want {want_code}), '
                     f'{sum(map(len, got.values()))} instructions, an intact archive of those '
                     f'chunks {sum(map(len, want.values()))}')
        print(f'{len(chunks)} flips, {len(cuts)} cuts checked')
    print(f'{len(FAILURES)} failures')
    return 1 if FAILURES else 0


if __name__ == '__main__':
    sys.exit(main())
