#!/usr/bin/env python3
"""Damages the PT bytes inside a .ptar while keeping the archive well-formed (format/FORMAT.md:
chunk header u32 sync 'PTCK', u16 type, u16 flags, u64 stored, u64 raw, u32 payload CRC32C,
u32 header CRC32C; payload padded to 8; flag 1 = lz4 block). The changed chunk is rewritten
uncompressed with fresh checksums, so the damage reaches the PT packet decoder, not the reader."""
import ctypes
import ctypes.util

PT_DATA = 2
END = 15
HEADER = 32
PSB = bytes([0x02, 0x82]) * 8


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def lz4_decompress(data, raw_size):
    lib = ctypes.CDLL(ctypes.util.find_library('lz4') or 'liblz4.so.1')
    out = ctypes.create_string_buffer(raw_size)
    n = lib.LZ4_decompress_safe(data, out, len(data), raw_size)
    if n != raw_size:
        raise ValueError(f'lz4 payload decodes to {n} bytes, expected {raw_size}')
    return out.raw


def le(data, off, size):
    return int.from_bytes(data[off:off + size], 'little')


def chunk(ctype, payload):
    head = bytearray(HEADER)
    head[0:4] = b'PTCK'
    head[4:6] = ctype.to_bytes(2, 'little')
    head[8:16] = len(payload).to_bytes(8, 'little')
    head[16:24] = len(payload).to_bytes(8, 'little')
    head[24:28] = crc32c(payload).to_bytes(4, 'little')
    head[28:32] = crc32c(bytes(head[:28])).to_bytes(4, 'little')
    return bytes(head) + payload + bytes(-len(payload) % 8)


def flip_pt_byte(src, dst, after_psb):
    """Copies SRC to DST with one byte of the first PT chunk inverted, AFTER_PSB bytes past the
    first PSB's end in that chunk. Returns a description of where."""
    with open(src, 'rb') as f:
        data = f.read()
    header_size = le(data, 14, 2)
    out, pos, done = bytearray(data[:header_size]), header_size, None
    while pos + HEADER <= len(data):
        ctype, flags = le(data, pos + 4, 2), le(data, pos + 6, 2)
        stored, raw = le(data, pos + 8, 8), le(data, pos + 16, 8)
        end = pos + HEADER + stored + (-stored % 8)
        if ctype == PT_DATA and done is None:
            payload = data[pos + HEADER:pos + HEADER + stored]
            if flags & 1:
                payload = lz4_decompress(payload, raw)
            at = payload.find(PSB)
            if at >= 0 and at + len(PSB) + after_psb < len(payload):
                edited = bytearray(payload)
                target = at + len(PSB) + after_psb
                edited[target] ^= 0xFF
                out += chunk(PT_DATA, bytes(edited))
                done = f'{target} of the PT chunk at file offset {pos}'
                pos = end
                continue
        out += data[pos:end]
        pos = end
    if done is None:
        raise ValueError(f'{src}: no PT chunk with a PSB')
    with open(dst, 'wb') as f:
        f.write(out)
    return done


def read_chunks(path):
    """(file header bytes, [(type, raw payload)]) of an intact archive, payloads decompressed."""
    with open(path, 'rb') as f:
        data = f.read()
    header_size = le(data, 14, 2)
    chunks, pos = [], header_size
    while pos + HEADER <= len(data):
        ctype, flags = le(data, pos + 4, 2), le(data, pos + 6, 2)
        stored, raw = le(data, pos + 8, 8), le(data, pos + 16, 8)
        payload = data[pos + HEADER:pos + HEADER + stored]
        chunks.append((ctype, lz4_decompress(payload, raw) if flags & 1 else payload))
        pos += HEADER + stored + (-stored % 8)
    return data[:header_size], chunks


def write_chunks(path, header, chunks):
    """Writes HEADER then each (type, payload) uncompressed; returns each chunk's [start, end)."""
    out, spans = bytearray(header), []
    for ctype, payload in chunks:
        start = len(out)
        out += chunk(ctype, payload)
        spans.append((start, len(out)))
    with open(path, 'wb') as f:
        f.write(out)
    return spans


def replace_pt_stream(src, dst, pt):
    """Copies SRC, an archive of one PT stream, to DST with that stream's bytes replaced by PT:
    its first PtData chunk carries all of PT from stream offset 0 (its other fields kept), its
    other PtData chunks are left out, and the End chunk counts the chunks that are left."""
    header, chunks = read_chunks(src)
    out, placed = [], False
    for ctype, payload in chunks:
        if ctype == PT_DATA:
            if placed:
                continue
            fields = bytearray(payload[:48])
            fields[16:24] = bytes(8)  # stream_offset
            payload = bytes(fields) + len(pt).to_bytes(8, 'little') + pt
            placed = True
        if ctype == END:
            payload = len(out).to_bytes(8, 'little') + payload[8:]  # chunk_count
        out.append((ctype, payload))
    if not placed:
        raise ValueError(f'{src}: no PtData chunk')
    write_chunks(dst, header, out)
