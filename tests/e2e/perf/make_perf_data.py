#!/usr/bin/env python3
"""An independent perf.data writer (standard library only) for the differential tests.

It wraps hand-encoded Intel PT bytes for tests/perf/known_loop into a perf.data following the
documented layout (tools/perf/Documentation/perf.data-file-format.txt, include/uapi/linux/
perf_event.h, perf's util/intel-pt.h priv indices). It shares no code with ptscope's exporter, so
`perf script` and `pt-archive import-perf` reading this file check our reader and perf agree on
the layout, and `perf script` on our exporter's output checks our writer.

Usage: make_perf_data.py --binary PATH --out FILE [--pid N] [--timed | --per-cpu]

--per-cpu writes the shape `perf record -a -e intel_pt//u` produces: a timed per-CPU trace on
CPU 1 (AUXTRACE tid -1), an intel_pt attr plus a dummy tracking attr with their own ids, the
tracking records (COMM, MMAP2, ITRACE_START, SWITCH_CPU_WIDE, AUX, EXIT) carrying the dummy's id,
TIME_CONV, ID_INDEX and FINISHED_ROUND records, and HOSTNAME, OSRELEASE, ARCH, NRCPUS, CPUID and
AUXTRACE feature sections (ARCH and NRCPUS are ones ptscope does not read).
"""
import argparse
import os
import struct

PID = 4242
SAMPLE_ID = 7          # the one id of our single attr
PMU_TYPE = 8           # any number works; must equal priv[PMU_TYPE] and attr.type
TSC_START = 0x1000     # --timed: TSC at trace start; time = tsc (mult 1<<10, shift 10)


def elf_exec_segment(path):
    """(e_entry, p_offset, p_vaddr, p_filesz) of the first executable PT_LOAD of an ELF64."""
    with open(path, 'rb') as f:
        elf = f.read()
    assert elf[:4] == b'\x7fELF' and elf[4] == 2, 'not ELF64'
    e_entry, e_phoff = struct.unpack_from('<QQ', elf, 0x18)
    e_phentsize, e_phnum = struct.unpack_from('<HH', elf, 0x36)
    for i in range(e_phnum):
        p_type, p_flags, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(
            '<IIQQQQ', elf, e_phoff + i * e_phentsize)
        if p_type == 1 and p_flags & 1:
            return e_entry, p_offset, p_vaddr, p_filesz
    raise SystemExit(f'{path}: no executable PT_LOAD')


def pt_bytes(entry, timed):
    """PT for known_loop: enable at _start, 3 loop iterations, disable at the exit syscall."""
    out = b'\x02\x82' * 8                      # PSB
    if timed:
        out += b'\x19' + TSC_START.to_bytes(7, 'little')   # TSC (56 bits)
    out += b'\x99\x01'                         # MODE.Exec: 64-bit
    out += b'\x02\x23'                         # PSBEND
    out += bytes([0x11 | (3 << 5)]) + entry.to_bytes(6, 'little')  # TIP.PGE, sext-48 IP
    # TNT-8, oldest bit highest, stop bit above it: ret T, jnz T, ret T, jnz T, ret T, jnz N.
    bits = [1, 1, 1, 1, 1, 0]
    payload = 1
    for b in bits:
        payload = (payload << 1) | b
    out += bytes([payload << 1])
    out += b'\x01'                             # TIP.PGD, IP suppressed (syscall leaves user mode)
    return out


def pad8(b):
    return b + b'\0' * (-len(b) % 8)


def record(rtype, misc, body, trailer):
    size = 8 + len(body) + len(trailer)
    return struct.pack('<IHH', rtype, misc, size) + body + trailer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--binary', required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--pid', type=int, default=PID)
    ap.add_argument('--timed', action='store_true')
    ap.add_argument('--per-cpu', action='store_true')
    args = ap.parse_args()
    path = os.path.abspath(args.binary)
    entry, p_offset, p_vaddr, p_filesz = elf_exec_segment(path)
    if args.per_cpu:
        return write_per_cpu(args, path, entry, p_offset, p_vaddr, p_filesz)
    pid = args.pid
    timed = args.timed

    # sample_type: IP|TID|IDENTIFIER (+TIME); non-sample trailer = {pid,tid}[,time],identifier.
    sample_type = 0x1 | 0x2 | 0x10000 | (0x4 if timed else 0)

    def trailer(t):
        return struct.pack('<II', pid, pid) + (struct.pack('<Q', t) if timed else b'') + \
            struct.pack('<Q', SAMPLE_ID)

    config = 0x2001 | (0x400 if timed else 0)   # pt, branch [, tsc]
    t0 = TSC_START if timed else 0
    t_end = TSC_START + 1000 if timed else 0

    priv = [0] * 17
    priv[0] = PMU_TYPE
    priv[1], priv[2], priv[3], priv[4] = (10, 1 << 10, 0, 1) if timed else (0, 1, 0, 0)
    priv[5], priv[6] = 0x400, 0x800            # TSC_BIT, NORETCOMP_BIT
    priv[10], priv[11] = 0x200, 0x3c000        # MTC_BIT, MTC_FREQ_BITS
    priv[14] = 0x2                             # CYC_BIT
    data = b''
    data += record(70, 0, struct.pack('<II', 1, 0) + struct.pack('<17Q', *priv), b'')
    comm = pad8(b'known_loop\0')
    data += record(3, 0x2000, struct.pack('<II', pid, pid) + comm, trailer(t0))
    mmap2 = struct.pack('<IIQQQIIQQII', pid, pid, p_vaddr, p_filesz, p_offset, 0, 0, 0, 0,
                        0x1 | 0x4, 0x2) + pad8(path.encode() + b'\0')
    data += record(10, 2, mmap2, trailer(t0))
    pt = pad8(pt_bytes(entry, timed))          # zero padding = PAD packets, as perf pads
    reference = t_end if timed else 0
    data += struct.pack('<IHHQQQIIII', 71, 0, 48, len(pt), 0, reference, 0, pid,
                        0xffffffff, 0) + pt
    data += record(4, 0, struct.pack('<IIIIQ', pid, pid, pid, pid, t_end), trailer(t_end))

    attr = struct.pack('<IIQQQQQ', PMU_TYPE, 128, config, 1, sample_type, 0,
                       (1 << 18) | (1 << 5) | (1 << 6))   # sample_id_all, exclude_kernel/hv
    attr = attr.ljust(128, b'\0')
    header_size = 104
    ids_off = header_size
    attrs_off = ids_off + 8
    attr_entry = attr + struct.pack('<QQ', ids_off, 8)
    data_off = attrs_off + len(attr_entry)
    header = b'PERFILE2' + struct.pack('<QQ', header_size, len(attr_entry))
    header += struct.pack('<QQQQQQ', attrs_off, len(attr_entry), data_off, len(data), 0, 0)
    header += struct.pack('<4Q', 0, 0, 0, 0)   # no feature sections
    blob = header + struct.pack('<Q', SAMPLE_ID) + attr_entry + data
    write_file(args.out, blob)


def write_file(out, blob):
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, 'wb') as f:
        f.write(blob)


def header_string(s):
    raw = s.encode() + b'\0'
    raw += b'\0' * (-len(raw) % 64)
    return struct.pack('<I', len(raw)) + raw


def write_per_cpu(args, path, entry, p_offset, p_vaddr, p_filesz):
    pid, cpu = args.pid, 1
    pt_id, dummy_id = 17, 18
    sample_type = 0x1 | 0x2 | 0x4 | 0x80 | 0x10000     # IP|TID|TIME|CPU|IDENTIFIER

    def trailer(t, p=pid):                              # {pid,tid}, time, {cpu,res}, id
        return struct.pack('<IIQIIQ', p, p, t, cpu, 0, dummy_id)

    t0, t_end = TSC_START, TSC_START + 1000
    priv = [0] * 17
    priv[0] = PMU_TYPE
    priv[1], priv[2], priv[3], priv[4] = 10, 1 << 10, 0, 1
    priv[5], priv[6], priv[7], priv[8], priv[9] = 0x400, 0x800, 3, 0, 1  # sched switch 3, per-CPU
    priv[10], priv[11], priv[14], priv[15] = 0x200, 0x3c000, 0x2, 24
    data = record(70, 0, struct.pack('<II', 1, 0) + struct.pack('<17Q', *priv), b'')
    data += record(79, 0, struct.pack('<QQQQQB7x', 10, 1 << 10, 0, 0, 0, 1), b'')   # TIME_CONV
    data += record(69, 0, struct.pack('<Q', 2) + struct.pack('<4Q', pt_id, 1, cpu, 0xffffffffffffffff)
                   + struct.pack('<4Q', dummy_id, 1, cpu, 0xffffffffffffffff), b'')  # ID_INDEX
    data += record(3, 0x2000, struct.pack('<II', pid, pid) + pad8(b'known_loop\0'), trailer(t0 - 3))
    mmap2 = struct.pack('<IIQQQIIQQII', pid, pid, p_vaddr, p_filesz, p_offset, 8, 1, 1234, 0,
                        0x1 | 0x4, 0x2) + pad8(path.encode() + b'\0')
    data += record(10, 2, mmap2, trailer(t0 - 2))
    data += record(12, 0, struct.pack('<II', pid, pid), trailer(t0 - 2))            # ITRACE_START
    data += record(15, 0x2000, struct.pack('<II', pid, pid), trailer(t0 - 1, 0))    # idle -> pid
    data += record(68, 0, b'', b'')                                                 # FINISHED_ROUND
    pt = pad8(pt_bytes(entry, True))
    data += record(11, 0, struct.pack('<QQQ', 0, len(pt), 0), trailer(t_end))       # AUX
    data += struct.pack('<IHHQQQIIII', 71, 0, 48, len(pt), 0, t_end, 1, 0xffffffff, cpu, 0) + pt
    aux_at = len(data) - len(pt) - 48
    data += record(4, 0, struct.pack('<IIIIQ', pid, pid, pid, pid, t_end), trailer(t_end))
    data += record(68, 0, b'', b'')

    attr_pt = struct.pack('<IIQQQQQ', PMU_TYPE, 128, 0x2401, 1, sample_type, 0,
                          (1 << 18) | (1 << 5) | (1 << 6) | 1).ljust(128, b'\0')
    tracking = (1 << 8) | (1 << 9) | (1 << 13) | (1 << 18) | (1 << 23) | (1 << 24) | (1 << 26)
    attr_dummy = struct.pack('<IIQQQQQ', 1, 128, 9, 1, sample_type, 0,
                             tracking | (1 << 5) | (1 << 6)).ljust(128, b'\0')
    ids_off = 104
    attrs_off = ids_off + 16
    entries = attr_pt + struct.pack('<QQ', ids_off, 8) + attr_dummy + struct.pack('<QQ', ids_off + 8, 8)
    data_off = attrs_off + len(entries)
    features = {3: header_string('perf-host'), 4: header_string('6.1.0-shape'),
                6: header_string('x86_64'), 7: struct.pack('<II', 2, 2),
                9: header_string('GenuineIntel,6,85,4'),
                18: struct.pack('<QQQ', 1, data_off + aux_at, 48)}
    bitmap = sum(1 << b for b in features)
    header = b'PERFILE2' + struct.pack('<QQ', 104, 144)
    header += struct.pack('<QQQQQQ', attrs_off, len(entries), data_off, len(data), 0, 0)
    header += struct.pack('<4Q', bitmap, 0, 0, 0)
    blob = header + struct.pack('<QQ', pt_id, dummy_id) + entries + data
    at = len(blob) + 16 * len(features)
    table, payload = b'', b''
    for bit in sorted(features):
        table += struct.pack('<QQ', at + len(payload), len(features[bit]))
        payload += features[bit]
    write_file(args.out, blob + table + payload)


if __name__ == '__main__':
    main()
