#!/usr/bin/env python3
"""Semantic checker for Perfetto TrackEvent traces written by pt-decode (standard library only).

Usage: check_perfetto.py TRACE[.gz] [--max-depth N] [--dump] [--expect-name NAME ...]

Walks the protobuf wire format (field numbers: decode/src/sink/perfetto_trace.proto) and checks
what trace processor relies on:
  - the first packet of each trusted sequence sets SEQ_INCREMENTAL_STATE_CLEARED;
  - packets using interned ids set SEQ_NEEDS_INCREMENTAL_STATE on a non-zero sequence;
  - every iid (event names, debug annotation names, source locations, debug annotation string
    values) is != 0 and defined on its sequence before (or in) the packet using it;
  - timestamps on a sequence-scoped clock (64-127, from the packet or the sequence's
    trace_packet_defaults) come after a ClockSnapshot on that sequence that ties the clock to
    BOOTTIME; an incremental clock's timestamps are deltas from its previous value (trace
    processor's rules), and are converted to BOOTTIME for every check and for --dump;
  - a packet relying on the sequence's defaults (clock or track) sets SEQ_NEEDS_INCREMENTAL_STATE;
    a ClockSnapshot packet carries no event or descriptor (trace processor reads nothing else);
  - SLICE_BEGIN/SLICE_END balance per track (no END without BEGIN, nothing left open), nesting
    depth <= --max-depth (default 500);
  - timestamps are non-decreasing per sequence, and every track event has one;
  - every referenced track uuid has a TrackDescriptor earlier in the file; one thread track per
    (pid, tid); a uuid is never described twice differently.
Prints a one-line summary and exits 0, or prints the problems (first 20) and exits 1.
--dump prints each thread's slices as an indented tree ("name [start +dur]"), for e2e tests.
--expect-name fails unless some slice has exactly that name.
"""
import argparse
import gzip
import sys

SEQ_CLEARED, SEQ_NEEDS = 1, 2
BEGIN, END, INSTANT = 1, 2, 3
BOOTTIME = 6


class WireError(Exception):
    pass


def read_varint(buf, pos):
    if pos < len(buf) and buf[pos] < 0x80:  # fast path: one byte
        return buf[pos], pos + 1
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise WireError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise WireError("varint longer than 10 bytes")


def fields(buf):
    """Yields (field_number, wire_type, value); value is an int or bytes."""
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(buf, pos)
        elif wire == 1:
            if pos + 8 > len(buf):
                raise WireError("truncated fixed64")
            value, pos = int.from_bytes(buf[pos:pos + 8], "little"), pos + 8
        elif wire == 2:
            length, pos = read_varint(buf, pos)
            if pos + length > len(buf):
                raise WireError("length-delimited field %d runs past its message" % field)
            value, pos = bytes(buf[pos:pos + length]), pos + length
        elif wire == 5:
            if pos + 4 > len(buf):
                raise WireError("truncated fixed32")
            value, pos = int.from_bytes(buf[pos:pos + 4], "little"), pos + 4
        else:
            raise WireError("unsupported wire type %d (field %d)" % (wire, field))
        yield field, wire, value


def message(buf):
    """Field number -> list of values."""
    out = {}
    for field, _, value in fields(buf):
        out.setdefault(field, []).append(value)
    return out


def one(msg, field, default=None):
    values = msg.get(field)
    return values[-1] if values else default


class Sequence:
    def __init__(self):
        self.started = False
        self.tables = {}  # interned field -> {iid: name}
        self.last_ts = None
        self.default_track = None
        self.default_clock = None
        self.clocks = {}  # sequence clock id -> {"value", "offset" (to BOOTTIME), "incremental"}


class Checker:
    def __init__(self, max_depth):
        self.max_depth = max_depth
        self.problems = []
        self.sequences = {}
        self.tracks = {}        # uuid -> descriptor bytes
        self.thread_tracks = {}  # (pid, tid) -> uuid
        self.track_names = {}   # uuid -> label
        self.open = {}          # uuid -> list of [name, start]
        self.slices = {}        # uuid -> list of (depth, name, start, end)
        self.names = set()
        self.counts = {"packets": 0, "slices": 0, "instants": 0, "max_depth": 0}
        self.where = ""

    def problem(self, text):
        self.problems.append("%s: %s" % (self.where, text))

    def intern(self, seq, interned):
        # InternedData: event_names 2, debug_annotation_names 3, string values 29; entries {iid 1}.
        for field in (1, 2, 3, 4, 29):
            for entry in interned.get(field, []):
                e = message(entry)
                iid = one(e, 1, 0)
                if iid == 0:
                    self.problem("interned entry (InternedData field %d) with iid 0" % field)
                    continue
                name = one(e, 2, b"").decode("utf-8", "replace")
                seq.tables.setdefault(field, {})[iid] = name

    def lookup(self, seq, field, iid, what):
        if iid == 0:
            self.problem("%s iid is 0" % what)
            return None
        table = seq.tables.get(field, {})
        if iid not in table:
            self.problem("%s iid %d used before it is defined on this sequence" % (what, iid))
            return None
        return table[iid]

    def packet(self, index, offset, body):
        self.counts["packets"] += 1
        self.where = "packet #%d (offset %d)" % (index, offset)
        p = message(body)
        seq_id = one(p, 10, 0)
        flags = one(p, 13, 0)
        seq = self.sequences.setdefault(seq_id, Sequence())
        if not seq.started and seq_id != 0:
            seq.started = True
            if not flags & SEQ_CLEARED and not one(p, 41, 0):
                self.problem("first packet of sequence %d lacks SEQ_INCREMENTAL_STATE_CLEARED" % seq_id)
        if flags & SEQ_CLEARED:
            seq.tables = {}
            seq.default_track = None
            seq.default_clock = None
        if 59 in p:
            defaults = message(one(p, 59))
            seq.default_clock = one(defaults, 58)
            if 11 in defaults:
                seq.default_track = one(message(one(defaults, 11)), 11)
        if 12 in p:
            self.intern(seq, message(one(p, 12)))
        if 6 in p:
            if 11 in p or 60 in p:
                self.problem("a ClockSnapshot packet also carries an event or a descriptor, which "
                             "trace processor ignores")
            self.snapshot(seq, seq_id, message(one(p, 6)))
            return
        ts = one(p, 8)
        uses_default_clock = ts is not None and 58 not in p and seq.default_clock is not None
        if ts is not None:
            ts = self.to_boottime(seq, one(p, 58, seq.default_clock), ts)
        if uses_default_clock and not flags & SEQ_NEEDS:
            self.problem("packet uses the sequence's default clock without "
                         "SEQ_NEEDS_INCREMENTAL_STATE")
        if 60 in p:
            self.descriptor(message(one(p, 60)), one(p, 60))
        if 11 in p:
            self.track_event(seq, seq_id, flags, ts, message(one(p, 11)))

    def snapshot(self, seq, seq_id, snap):
        clocks = [message(c) for c in snap.get(1, [])]
        boot = [one(c, 2, 0) for c in clocks if one(c, 1, 0) == BOOTTIME]
        for c in clocks:
            cid, value = one(c, 1, 0), one(c, 2, 0)
            if one(c, 4, 1) != 1:
                self.problem("clock %d has a unit multiplier (unsupported here)" % cid)
            if not 64 <= cid < 128:
                if one(c, 3, 0):
                    self.problem("global clock %d cannot be incremental" % cid)
                continue
            if seq_id == 0:
                self.problem("snapshot of sequence clock %d on sequence 0" % cid)
            if len(boot) != 1:
                self.problem("snapshot does not tie clock %d to BOOTTIME" % cid)
                continue
            seq.clocks[cid] = {"value": value, "offset": boot[0] - value,
                               "incremental": bool(one(c, 3, 0))}

    def to_boottime(self, seq, clock_id, ts):
        if clock_id is None or clock_id == BOOTTIME:
            return ts
        if not 64 <= clock_id < 128:
            self.problem("timestamp on clock %d, which this checker does not convert" % clock_id)
            return ts
        clock = seq.clocks.get(clock_id)
        if clock is None:
            self.problem("timestamp on sequence clock %d before a snapshot of it" % clock_id)
            return ts
        if clock["incremental"]:
            clock["value"] += ts
            return clock["value"] + clock["offset"]
        return ts + clock["offset"]

    def descriptor(self, d, raw):
        uuid = one(d, 1, 0)
        if uuid == 0:
            self.problem("TrackDescriptor without uuid")
            return
        if uuid in self.tracks and self.tracks[uuid] != raw:
            self.problem("track uuid %d described twice differently" % uuid)
        self.tracks[uuid] = raw
        if 4 in d:
            t = message(one(d, 4))
            key = (one(t, 1, 0), one(t, 2, 0))
            if key in self.thread_tracks and self.thread_tracks[key] != uuid:
                self.problem("second thread track for pid %d tid %d" % key)
            self.thread_tracks[key] = uuid
            name = one(t, 5, b"").decode("utf-8", "replace")
            self.track_names[uuid] = "thread %d/%d %s" % (key[0], key[1], name)
        elif 3 in d:
            pr = message(one(d, 3))
            self.track_names[uuid] = "process %d" % one(pr, 1, 0)

    def track_event(self, seq, seq_id, flags, ts, e):
        etype = one(e, 9, 0)
        uuid = one(e, 11, seq.default_track)
        annotations = [message(a) for a in e.get(4, [])]
        uses_iids = 10 in e or 3 in e or 34 in e or any(1 in a or 17 in a for a in annotations)
        if uses_iids and (seq_id == 0 or not flags & SEQ_NEEDS):
            self.problem("packet uses interned ids without SEQ_NEEDS_INCREMENTAL_STATE on a "
                         "non-zero sequence")
        if 11 not in e and seq.default_track is not None and not flags & SEQ_NEEDS:
            self.problem("track event on the default track without SEQ_NEEDS_INCREMENTAL_STATE")
        if ts is None:
            self.problem("track event without timestamp")
            ts = seq.last_ts or 0
        if seq.last_ts is not None and ts < seq.last_ts:
            self.problem("timestamp %d goes back from %d on sequence %d" % (ts, seq.last_ts, seq_id))
        seq.last_ts = ts
        if uuid is None or uuid not in self.tracks:
            self.problem("track event on track uuid %s with no descriptor before it" % uuid)
        name = None
        if 10 in e:
            name = self.lookup(seq, 2, one(e, 10), "event name")
        elif 23 in e:
            name = one(e, 23).decode("utf-8", "replace")
        if 34 in e:
            self.lookup(seq, 4, one(e, 34), "source location")
        for am in annotations:
            if 1 in am:
                self.lookup(seq, 3, one(am, 1), "debug annotation name")
            if 17 in am:
                self.lookup(seq, 29, one(am, 17), "debug annotation string value")
        stack = self.open.setdefault(uuid, [])
        if etype == BEGIN:
            if name is None:
                self.problem("SLICE_BEGIN without a name")
            stack.append([name, ts])
            self.names.add(name)
            self.counts["slices"] += 1
            self.counts["max_depth"] = max(self.counts["max_depth"], len(stack))
            if len(stack) > self.max_depth:
                self.problem("nesting depth %d exceeds %d on track %s" % (len(stack), self.max_depth, uuid))
        elif etype == END:
            if not stack:
                self.problem("SLICE_END without an open slice on track %s" % uuid)
                return
            bname, start = stack.pop()
            self.slices.setdefault(uuid, []).append((len(stack), bname, start, ts))
        elif etype == INSTANT:
            self.counts["instants"] += 1
            self.slices.setdefault(uuid, []).append((len(stack), "! %s" % name, ts, None))
        else:
            self.problem("unexpected TrackEvent type %d" % etype)

    def finish(self):
        self.where = "end of trace"
        for uuid, stack in self.open.items():
            if stack:
                self.problem("%d slice(s) left open on track %s (innermost %r)" % (len(stack), uuid, stack[-1][0]))


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data


def walk(data, checker):
    pos = index = 0
    while pos < len(data):
        start = pos
        key, pos = read_varint(data, pos)
        if key != 0x0A:
            raise WireError("offset %d: expected Trace.packet (0x0a), found key 0x%x" % (start, key))
        length, pos = read_varint(data, pos)
        if pos + length > len(data):
            raise WireError("offset %d: packet of %d bytes runs past the end of the file" % (start, length))
        checker.packet(index, start, memoryview(data)[pos:pos + length])
        pos += length
        index += 1


def dump(checker):
    for uuid in sorted(checker.slices):
        print(checker.track_names.get(uuid, "track %d" % uuid))
        # Sort by start, then depth: parents (which start no later) before children.
        for depth, name, start, end in sorted(checker.slices[uuid], key=lambda s: (s[2], s[0])):
            span = "%d" % start if end is None else "%d +%d" % (start, end - start)
            print("%s%s [%s]" % ("  " * (depth + 1), name, span))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--max-depth", type=int, default=500)
    ap.add_argument("--dump", action="store_true")
    ap.add_argument("--expect-name", action="append", default=[])
    args = ap.parse_args()
    checker = Checker(args.max_depth)
    try:
        walk(load(args.trace), checker)
    except (OSError, EOFError, gzip.BadGzipFile) as err:
        print("check_perfetto: %s: cannot read: %s" % (args.trace, err), file=sys.stderr)
        return 1
    except WireError as err:
        print("check_perfetto: %s: %s: malformed protobuf: %s" % (args.trace, checker.where, err), file=sys.stderr)
        return 1
    checker.finish()
    for name in args.expect_name:
        if name not in checker.names:
            checker.problems.append("no slice named %r" % name)
    if args.dump:
        dump(checker)
    if checker.problems:
        for p in checker.problems[:20]:
            print("check_perfetto: %s: %s" % (args.trace, p), file=sys.stderr)
        if len(checker.problems) > 20:
            print("check_perfetto: ... %d more" % (len(checker.problems) - 20), file=sys.stderr)
        return 1
    c = checker.counts
    threads = len(checker.thread_tracks)
    print("ok: %d packets, %d sequences, %d tracks (%d thread), %d slices, %d instants, max depth %d"
          % (c["packets"], len(checker.sequences), len(checker.tracks), threads, c["slices"],
             c["instants"], c["max_depth"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
