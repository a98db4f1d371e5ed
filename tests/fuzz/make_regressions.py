#!/usr/bin/env python3
"""Writes regression inputs for the fuzz targets (tests/fuzz/regressions/TARGET), one per class
of fault the black-box campaign of issue 24 found, made from the checked-in seeds so that each
is a real capture with one thing wrong. The unit suite replays them (fuzz-replay-TARGET): each
must be refused or read without a crash, a sanitizer report or 1 GiB of memory.

  archive/time-mult-2pow32.ptar    time.mult = 2^32 (SIGFPE in export-perf, "0 ns" in pt-decode)
  archive/time-shift-64.ptar       time.shift = 64 (a 64-bit shift: undefined behaviour)
  archive/lz4-claims-1gib.ptar     a 104-byte lz4 chunk claiming 1 GiB raw (was inflated first)
  perf_data/time-mult-2pow32.data  AUXTRACE_INFO TIME_MULT = 2^32 (imported, then SIGFPE on export)
  perf_data/time-shift-64.data     AUXTRACE_INFO TIME_SHIFT = 64
  perf_data/time-conv-mult-2pow32.data  TIME_MULT 0, so TIME_CONV's time_mult = 2^32 is used
  jitdump/extreme-times-move-chain.dump  a first MOVE that makes jitdump_fuzz's time map steep
      (tsc 0 at 0 ns, 2^64-1 at 1 ns), then code moved up twice by more than 2^62 and back down
      (signed overflows in JitTimeMap and in chained JIT_CODE_MOVE deltas)

usage: tests/fuzz/make_regressions.py   (rewrites the files above; deterministic)
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'support'))
import ptar_edit  # noqa: E402

METADATA, PT_DATA, END = 1, 2, 15


def write(target, name, data):
    directory = os.path.join(HERE, 'regressions', target)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), 'wb') as f:
        f.write(data)


def metadata(entries):
    out = struct.pack('<I', len(entries))
    for key, value in entries:
        for text in (key, value):
            raw = text.encode()
            out += struct.pack('<I', len(raw)) + raw
    return out


def parse_metadata(payload):
    count, at, entries = struct.unpack_from('<I', payload, 0)[0], 4, []
    for _ in range(count):
        pair = []
        for _ in range(2):
            n = struct.unpack_from('<I', payload, at)[0]
            pair.append(payload[at + 4:at + 4 + n].decode())
            at += 4 + n
        entries.append(tuple(pair))
    return entries


def archive_bytes(header, chunks):
    return bytes(header) + b''.join(ptar_edit.chunk(t, p) for t, p in chunks)


def archive_with_time(header, chunks, key, value):
    out, found = [], False
    for ctype, payload in chunks:
        if ctype == METADATA:
            entries = [(k, value if k == key else v) for k, v in parse_metadata(payload)]
            found = found or (key, value) in entries
            payload = metadata(entries)
        out.append((ctype, payload))
    assert found, f'the seed has no {key}'
    return archive_bytes(header, out)


def lz4_chunk_claiming(raw_size, stored):
    """A chunk with the lz4 flag, STORED payload bytes and a raw_size they cannot produce, its
    checksums right (the payload is intact as stored: only the claim is impossible)."""
    head = bytearray(ptar_edit.HEADER)
    head[0:4] = b'PTCK'
    head[4:6] = PT_DATA.to_bytes(2, 'little')
    head[6:8] = (1).to_bytes(2, 'little')
    head[8:16] = len(stored).to_bytes(8, 'little')
    head[16:24] = raw_size.to_bytes(8, 'little')
    head[24:28] = ptar_edit.crc32c(stored).to_bytes(4, 'little')
    head[28:32] = ptar_edit.crc32c(bytes(head[:28])).to_bytes(4, 'little')
    return bytes(head) + stored + bytes(-len(stored) % 8)


def archives():
    header, chunks = ptar_edit.read_chunks(os.path.join(HERE, 'corpus', 'archive', 'calls.ptar'))
    write('archive', 'time-mult-2pow32.ptar',
          archive_with_time(header, chunks, 'time.mult', str(2**32)))
    write('archive', 'time-shift-64.ptar', archive_with_time(header, chunks, 'time.shift', '64'))
    # 104 stored bytes: whatever they hold, an lz4 block that size expands at most ~255 times,
    # so 1 GiB is impossible (the reader allocated it before decompressing).
    stored = bytes([0x1f, 0x41]) + bytes([0xff] * 100) + bytes([0x01, 0x00])
    body = archive_bytes(header, [(t, p) for t, p in chunks if t != END])
    count = sum(1 for t, _ in chunks if t != END) + 1
    write('archive', 'lz4-claims-1gib.ptar',
          body + lz4_chunk_claiming(2**30, stored) +
          ptar_edit.chunk(END, struct.pack('<Q', count)))


def perf_records(data):
    offset, size = struct.unpack_from('<QQ', data, 40)
    at, found = offset, {}
    while at < offset + size:
        rtype, _, rsize = struct.unpack_from('<IHH', data, at)
        found.setdefault(rtype, at)
        at += rsize + (struct.unpack_from('<Q', data, at + 8)[0] if rtype == 71 else 0)
    return found


def perf_data():
    with open(os.path.join(HERE, 'corpus', 'perf_data', 'calls.data'), 'rb') as f:
        data = f.read()
    records = perf_records(data)
    info, conv = records[70], records[79]  # AUXTRACE_INFO: priv[] at 16; TIME_CONV
    edited = bytearray(data)
    struct.pack_into('<Q', edited, info + 16 + 2 * 8, 2**32)  # priv[2] TIME_MULT
    write('perf_data', 'time-mult-2pow32.data', bytes(edited))
    edited = bytearray(data)
    struct.pack_into('<Q', edited, info + 16 + 1 * 8, 64)  # priv[1] TIME_SHIFT
    write('perf_data', 'time-shift-64.data', bytes(edited))
    edited = bytearray(data)
    struct.pack_into('<Q', edited, info + 16 + 2 * 8, 0)
    struct.pack_into('<Q', edited, conv + 16, 2**32)  # TIME_CONV time_mult
    write('perf_data', 'time-conv-mult-2pow32.data', bytes(edited))


def jitdump():
    records = []

    def record(rid, timestamp, body):
        records.append(struct.pack('<IIQ', rid, 16 + len(body), timestamp) + body)

    def move(timestamp, old, new, size):
        record(1, timestamp, struct.pack('<IIQQQQQ', 77, 77, 0, old, new, size, 1))

    move(1, 0, 2**64 - 1, 0)  # the target's time map: pairs (2^64-1, 1 ns) and (0, 0 ns)
    code = bytes([0x90, 0xc3])
    record(0, 100, struct.pack('<IIQQQQ', 77, 77, 0x10, 0x10, len(code), 1) + b'f\0' + code)
    move(200, 0x10, 0x7000000000000000, len(code))
    move(300, 0x7000000000000000, 0xe000000000000000, len(code))
    move(400, 0xe000000000000000, 0x20, len(code))
    header = struct.pack('<IIIIIIQQ', 0x4A695444, 1, 40, 62, 0, 77, 0, 0)
    write('jitdump', 'extreme-times-move-chain.dump', header + b''.join(records))


def main():
    archives()
    perf_data()
    jitdump()
    return 0


if __name__ == '__main__':
    sys.exit(main())
