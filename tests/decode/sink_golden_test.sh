#!/bin/sh
# Golden test of the sinks: writes the small tree of sink_sample.cpp as text, folded, speedscope
# and Perfetto, compares each with the hand-reviewed files in golden/, decodes the Perfetto output
# with protoc against decode/src/sink/perfetto_trace.proto, runs the semantic checker on it (plain and .gz),
# and makes sure the checker rejects damaged traces.
# Usage: sink_golden_test.sh SAMPLE_EXE PROTOC PROTO GOLDEN_DIR CHECKER WORK_DIR
set -eu
sample=$1 protoc=$2 proto=$3 golden=$4 checker=$5 work=$6/sink_golden
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }
same() { diff -u "$1" "$2" || fail "$2 differs from golden $1"; }

"$sample" text "$work/small_tree.txt"
same "$golden/small_tree.txt" "$work/small_tree.txt"
"$sample" folded "$work/small_tree.folded"
same "$golden/small_tree.folded" "$work/small_tree.folded"
# speedscope: one evented profile per thread, the same events in time order, shared frames.
"$sample" speedscope "$work/small_tree.speedscope.json"
same "$golden/small_tree.speedscope.json" "$work/small_tree.speedscope.json"
# The summary's numbers were worked out by hand from the tree in sink_sample.cpp.
"$sample" summary "$work/small_tree.summary.txt"
same "$golden/small_tree.summary.txt" "$work/small_tree.summary.txt"

"$sample" perfetto "$work/small_tree.pftrace"
"$protoc" --proto_path="$(dirname "$proto")" --decode=ptscope.perfetto.Trace \
  "$(basename "$proto")" < "$work/small_tree.pftrace" > "$work/small_tree.textproto"
same "$golden/small_tree.textproto" "$work/small_tree.textproto"
python3 "$checker" "$work/small_tree.pftrace" --dump --expect-name main --expect-name helper \
  > "$work/small_tree.dump"
same "$golden/small_tree.dump" "$work/small_tree.dump"

"$sample" perfetto "$work/small_tree.pftrace.gz"
[ "$(head -c 2 "$work/small_tree.pftrace.gz" | od -An -tx1 | tr -d ' ')" = 1f8b ] \
  || fail ".gz output is not gzip"
gunzip -c "$work/small_tree.pftrace.gz" | cmp - "$work/small_tree.pftrace" \
  || fail ".gz output does not decompress to the plain output"
python3 "$checker" "$work/small_tree.pftrace.gz" > /dev/null || fail "checker rejects the .gz trace"

# StackTracker into PerfettoSink: recursion folded at 500 levels, a gap, a tail call, a signal.
"$sample" deep "$work/deep.pftrace"
# The dump as "depth name [start +dur]"; the 498 emitted rec levels are counted, the rest compared.
python3 "$checker" "$work/deep.pftrace" --dump |
  awk '{ match($0, /^ */); printf "%d %s\n", RLENGTH / 2, substr($0, RLENGTH + 1) }' \
  > "$work/deep.levels"
[ "$(grep -c '^[0-9]* rec \[' "$work/deep.levels")" = 498 ] || fail "deep: want 498 rec slices"
grep -v '^[0-9]* rec \[' "$work/deep.levels" > "$work/deep.outline"
same "$golden/deep.outline" "$work/deep.outline"

# Damaged traces must be rejected: drop packet N, drop a packet's sequence_flags, or cut the file.
drop_packet() {
  python3 - "$work/small_tree.pftrace" "$1" "$2" <<'PY'
import sys
data, drop, out, pos, index = open(sys.argv[1], "rb").read(), int(sys.argv[2]), bytearray(), 0, 0
def varint(pos):
    v = s = 0
    while True:
        b = data[pos]; pos += 1; v |= (b & 0x7f) << s; s += 7
        if not b & 0x80: return v, pos
while pos < len(data):
    start = pos
    _, pos = varint(pos)
    n, pos = varint(pos)
    if index != drop: out += data[start:pos + n]
    pos += n; index += 1
open(sys.argv[3], "wb").write(out)
PY
}
# The first SLICE_END packet (no interned ids: it relies only on the sequence's default track and
# clock) rewritten without its sequence_flags, the packet's length re-encoded.
drop_flags() {
  python3 - "$work/small_tree.pftrace" "$1" <<'PY'
import sys
data, out, pos, done = open(sys.argv[1], "rb").read(), bytearray(), 0, False
def varint(buf, pos):
    v = s = 0
    while True:
        b = buf[pos]; pos += 1; v |= (b & 0x7f) << s; s += 7
        if not b & 0x80: return v, pos
def encode(v):
    out = bytearray()
    while True:
        out.append(v & 0x7f | (0x80 if v > 0x7f else 0)); v >>= 7
        if not v: return out
def fields(buf):  # (field number, value: int or bytes, the field's encoded bytes)
    pos = 0
    while pos < len(buf):
        start = pos
        key, pos = varint(buf, pos)
        if key & 7 == 0: value, pos = varint(buf, pos)
        elif key & 7 == 2: n, pos = varint(buf, pos); value, pos = buf[pos:pos + n], pos + n
        elif key & 7 in (1, 5): n = 8 if key & 7 == 1 else 4; value, pos = buf[pos:pos + n], pos + n
        else: sys.exit("drop_flags: wire type %d" % (key & 7))
        yield key >> 3, value, buf[start:pos]
while pos < len(data):
    start = pos
    _, pos = varint(data, pos)
    n, pos = varint(data, pos)
    packet = list(fields(data[pos:pos + n]))
    pos += n
    event = [v for f, v, _ in packet if f == 11]
    if done or not event or (9, 2) not in [(f, v) for f, v, _ in fields(event[0])] \
            or 13 not in [f for f, _, _ in packet]:
        out += data[start:pos]
        continue
    body, done = b"".join(raw for f, _, raw in packet if f != 13), True
    out += b"\x0a" + encode(len(body)) + body
if not done: sys.exit("drop_flags: no SLICE_END packet with sequence_flags")
open(sys.argv[2], "wb").write(out)
PY
}
expect_reject() {
  if python3 "$checker" "$1" > /dev/null 2> "$work/reject.err"; then fail "checker accepted $1 ($2)"; fi
  grep -q "$2" "$work/reject.err" || { cat "$work/reject.err" >&2; fail "checker said something else for $1"; }
}
drop_packet 0 "$work/no_cleared.pftrace"          # process descriptor: the CLEARED packet
expect_reject "$work/no_cleared.pftrace" "lacks SEQ_INCREMENTAL_STATE_CLEARED"
drop_packet 5 "$work/no_snapshot.pftrace"         # thread 20's clock snapshot
expect_reject "$work/no_snapshot.pftrace" "timestamp on sequence clock 64 before a snapshot of it"
count=$(python3 "$checker" "$work/small_tree.pftrace" | sed 's/ok: \([0-9]*\) packets.*/\1/')
drop_packet $((count - 1)) "$work/unbalanced.pftrace"  # the last END
expect_reject "$work/unbalanced.pftrace" "left open"
drop_flags "$work/no_needs.pftrace" || fail "drop_flags"
expect_reject "$work/no_needs.pftrace" \
  "packet uses the sequence's default clock without SEQ_NEEDS_INCREMENTAL_STATE"
expect_reject "$work/no_needs.pftrace" \
  "track event on the default track without SEQ_NEEDS_INCREMENTAL_STATE"
[ "$(wc -l < "$work/reject.err")" = 2 ] || { cat "$work/reject.err" >&2; fail "no_needs: other problems"; }
head -c 100 "$work/small_tree.pftrace" > "$work/cut.pftrace"
expect_reject "$work/cut.pftrace" "malformed protobuf"
echo "ok"
