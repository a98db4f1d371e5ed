#!/usr/bin/env python3
"""pt-archive embed end to end (issue #7).

A stripped embed_program is recorded with pt-emulate and deleted; an unstripped copy sits in a
--symbols directory. Checks, on that one recording:
  refuse    a directory holding a rebuilt embed_program (other build id): not embedded, the
            refusal names the file and both build ids
  recorded  without --symbols, libc and ld.so are embedded from their recorded paths (build ids
            match, as pt-decode resolves them); the deleted program is not found
  embed     from the unstripped copy: the report, `pt-archive info` (embedded-binaries feature,
            module flag, elf blob with the build id), every other chunk byte-identical, mode
            0600, and pt-decode without --symbols names main > embed_middle > embed_leaf x2
  idempotent  embedding again changes nothing (bytes and report)
  debug     --debug-info from DIR/.build-id/xx/rest.debug next to a stripped copy: both blobs
            embedded, names exact again
  unknown   a chunk type of a newer minor version is kept in place byte for byte; an archive
            without End (cut off) gets the blob appended and stays without End
  damaged   a flipped payload byte: exit 1, one line naming the file, chunk and offset, and the
            input is left alone; a file that is not an archive is refused the same way

  embed_test.py PT_EMULATE PT_ARCHIVE PT_DECODE PROGRAM PROGRAM_V2
"""
import hashlib
import os
import re
import shutil
import stat
import struct
import subprocess
import sys
import tempfile

EXPECTED_TREE = ['main', '  embed_middle', '    embed_leaf', '    embed_leaf']


class Failure(Exception):
    pass


def run(cmd, expect_rc=0):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if expect_rc is not None and r.returncode != expect_rc:
        raise Failure(f'{" ".join(cmd)} exited {r.returncode} (expected {expect_rc}):\n'
                      f'{r.stdout}{r.stderr}')
    return r


def chunks(path):
    """(type, bytes) of every chunk, framing of format/FORMAT.md."""
    data = open(path, 'rb').read()
    header_size = struct.unpack_from('<H', data, 14)[0]
    out, at = [], header_size
    while at + 32 <= len(data):
        ctype, stored = struct.unpack_from('<H', data, at + 4)[0], struct.unpack_from('<Q', data, at + 8)[0]
        end = at + 32 + (stored + 7) // 8 * 8
        out.append((ctype, data[at:end]))
        at = end
    return out


def build_id(path):
    r = run(['readelf', '-n', path])
    m = re.search(r'Build ID: ([0-9a-f]+)', r.stdout)
    if not m:
        raise Failure(f'no build id in {path}')
    return m.group(1)


def tree_of_main(decode, archive, work, expect_rc=0):
    """The slice tree below main as indented names ('main', '  child', ...). pt-decode exits 3
    (partial) when the program's code is missing."""
    text_path = os.path.join(work, 'tree.txt')
    run([decode, '--format', 'text', '-o', text_path, archive], expect_rc=expect_rc)
    rows = []
    for line in open(text_path, encoding='utf-8'):
        m = re.match(r'^( *)\[\d+(?: \+\d+)?\] (\S+)', line)
        if m:
            rows.append((len(m.group(1)) // 2, m.group(2)))
    starts = [i for i, (_, name) in enumerate(rows) if name == 'main']
    if len(starts) != 1:
        return [name for _, name in rows]
    depth = rows[starts[0]][0]
    tree = ['main']
    for d, name in rows[starts[0] + 1:]:
        if d <= depth:
            break
        tree.append('  ' * (d - depth) + name)
    return tree


def check_refuse(tools, work, archive, program_v2, recorded, want_id):
    emulate, ptarchive, decode = tools
    wrong = os.path.join(work, 'wrong')
    os.makedirs(wrong)
    shutil.copy(program_v2, os.path.join(wrong, 'embed_program'))
    out = os.path.join(work, 'refused.ptar')
    r = run([ptarchive, 'embed', archive, '--symbols', wrong, '-o', out])
    v2_id = build_id(program_v2)
    want = (f'  note: refused {wrong}/embed_program: build id {v2_id}, but the capture\'s '
            f'{recorded} has build id {want_id} (another build: its addresses do not match)')
    if want not in r.stdout.splitlines():
        raise Failure(f'no refusal line {want!r} in:\n{r.stdout}')
    if f'not found  {recorded} {want_id}' not in r.stdout.splitlines():
        raise Failure(f'the module is not reported as not found:\n{r.stdout}')
    if not r.stdout.splitlines()[-1].startswith(f'{out}: 2 embedded, 0 debug files embedded, '
                                                '0 already present, 1 not found'):
        raise Failure(f'bad summary line: {r.stdout}')
    if want_id in run([ptarchive, 'info', out]).stdout.split('blobs')[-1]:
        raise Failure('the refused binary was embedded')


def check_recorded_paths(tools, work, archive, recorded):
    """Without --symbols, libc and ld.so are found where the capture saw them (their build ids
    match), as pt-decode finds them; the deleted program is not found. Returns the archive."""
    emulate, ptarchive, decode = tools
    out = os.path.join(work, 'libs.ptar')
    r = run([ptarchive, 'embed', archive, '-o', out])
    embedded = re.findall(r'^embedded   (\S+) ([0-9a-f]+) from (\S+) \((\d+) bytes, recorded path\)$',
                          r.stdout, re.M)
    names = sorted(os.path.basename(path) for path, _, _, _ in embedded)
    if names != ['ld-linux-x86-64.so.2', 'libc.so.6']:
        raise Failure(f'libc and ld.so were not embedded from their recorded paths:\n{r.stdout}')
    for path, bid, source, size in embedded:
        if source != path or build_id(path) != bid or os.path.getsize(path) != int(size):
            raise Failure(f'wrong file or size for {path}:\n{r.stdout}')
    if r.stdout.splitlines()[-1] != (f'{out}: 2 embedded, 0 debug files embedded, '
                                     '0 already present, 1 not found'):
        raise Failure(f'bad summary line: {r.stdout}')
    return out


def check_embed(tools, work, archive, syms, recorded, want_id):
    emulate, ptarchive, decode = tools
    out = os.path.join(work, 'once.ptar')
    r = run([ptarchive, 'embed', archive, '--symbols', syms, '-o', out])
    size = os.path.getsize(os.path.join(syms, 'embed_program'))
    want = f'embedded   {recorded} {want_id} from {syms}/embed_program ({size} bytes, --symbols)'
    if want not in r.stdout.splitlines():
        raise Failure(f'no line {want!r} in:\n{r.stdout}')
    if stat.S_IMODE(os.stat(out).st_mode) != 0o600:
        raise Failure(f'{out} has mode {oct(os.stat(out).st_mode)}, expected 0600')
    info = run([ptarchive, 'info', out]).stdout
    for line in [f'  {recorded}: build id {want_id}, ', f'  elf "{recorded}": {size} bytes, '
                 f'pid 0, vaddr 0x0, build id {want_id}']:
        if not any(l.startswith(line) for l in info.splitlines()):
            raise Failure(f'pt-archive info lacks {line!r}:\n{info}')
    if not re.search(rf'^  {re.escape(recorded)}: .*, embedded$', info, re.M):
        raise Failure(f'the module is not flagged embedded:\n{info}')
    if not re.search(r'^features: .*embedded-binaries', info, re.M):
        raise Failure(f'features lack embedded-binaries:\n{info}')
    run([ptarchive, 'verify', out])
    # Every input chunk except the Module of the embedded file and End is kept byte for byte, in
    # order; the output adds exactly one elf Blob.
    before, after = chunks(archive), chunks(out)
    kept = [c for c in before if c[0] not in (5, 15)]
    if [c for c in after if c[0] not in (5, 6, 15)] != [c for c in kept if c[0] != 6]:
        raise Failure('chunks other than Module/Blob/End changed')
    if [c for c in after if c[0] == 6][:-1] != [c for c in kept if c[0] == 6]:
        raise Failure('the existing Blob chunks changed or moved')
    changed = [i for i, (a, b) in enumerate(zip([c for c in before if c[0] == 5],
                                                 [c for c in after if c[0] == 5])) if a != b]
    if len(changed) != 1 or len(after) != len(before) + 1:
        raise Failure(f'expected one changed Module chunk and one new chunk, got {changed}, '
                      f'{len(before)} -> {len(after)} chunks')
    tree = tree_of_main(decode, out, work)
    if tree != EXPECTED_TREE:
        raise Failure(f'decoded tree {tree}, expected {EXPECTED_TREE}')
    return out


def check_idempotent(tools, work, once):
    emulate, ptarchive, decode = tools
    twice = os.path.join(work, 'twice.ptar')
    shutil.copy(once, twice)
    digest = hashlib.sha256(open(twice, 'rb').read()).hexdigest()
    r = run([ptarchive, 'embed', twice, '--symbols', os.path.join(work, 'syms')])
    if not r.stdout.splitlines()[-1] == (f'{twice}: 0 embedded, 0 debug files embedded, '
                                         '3 already present, 0 not found (archive unchanged)'):
        raise Failure(f'second embed did not find everything present:\n{r.stdout}')
    if hashlib.sha256(open(twice, 'rb').read()).hexdigest() != digest:
        raise Failure('embedding twice changed the archive')


def check_debug_info(tools, work, archive, stripped, syms, want_id):
    emulate, ptarchive, decode = tools
    dbg = os.path.join(work, 'dbg')
    os.makedirs(os.path.join(dbg, '.build-id', want_id[:2]))
    shutil.copy(stripped, os.path.join(dbg, 'embed_program'))
    debug_file = os.path.join(dbg, '.build-id', want_id[:2], want_id[2:] + '.debug')
    run(['objcopy', '--only-keep-debug', os.path.join(syms, 'embed_program'), debug_file])
    plain = os.path.join(work, 'plain.ptar')
    r = run([ptarchive, 'embed', archive, '--symbols', dbg, '-o', plain])
    if f'  separate debug info at {debug_file} (--debug-info embeds it)' not in r.stdout:
        raise Failure(f'no hint about the debug file:\n{r.stdout}')
    out = os.path.join(work, 'debug.ptar')
    r = run([ptarchive, 'embed', archive, '--symbols', dbg, '--debug-info', '-o', out])
    if not re.search(rf'^debug info .* {want_id} from {re.escape(debug_file)} \(\d+ bytes\)$',
                     r.stdout, re.M):
        raise Failure(f'the debug file was not embedded:\n{r.stdout}')
    info = run([ptarchive, 'info', out]).stdout
    if not re.search(rf'^  debuginfo ".*": \d+ bytes, .*build id {want_id}$', info, re.M):
        raise Failure(f'no debuginfo blob:\n{info}')
    tree = tree_of_main(decode, out, work)
    if tree != EXPECTED_TREE:
        raise Failure(f'decoded tree with embedded debug info {tree}, expected {EXPECTED_TREE}')


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def chunk_bytes(ctype, payload):
    """An uncompressed chunk (FORMAT.md "Chunk"): header with both CRCs, payload, padding."""
    head = struct.pack('<IHHQQI', 0x4B435450, ctype, 0, len(payload), len(payload),
                       crc32c(payload))
    head += struct.pack('<I', crc32c(head))
    return head + payload + bytes((8 - len(payload) % 8) % 8)


def check_unknown_and_incomplete(tools, work, archive):
    """A chunk type from a newer minor version is kept byte for byte and counted in End; an
    archive without End is embedded into and stays without End."""
    emulate, ptarchive, decode = tools
    data = open(archive, 'rb').read()
    listed = chunks(archive)
    if listed[-1][0] != 15:
        raise Failure('the capture has no End chunk')
    end_at = len(data) - len(listed[-1][1])
    unknown = chunk_bytes(12, b'future chunk payload')
    count = struct.unpack_from('<Q', listed[-1][1], 32)[0]
    newer = os.path.join(work, 'newer.ptar')
    open(newer, 'wb').write(data[:end_at] + unknown + chunk_bytes(15, struct.pack('<Q', count + 1)))
    run([ptarchive, 'verify', newer])
    out = os.path.join(work, 'newer-embedded.ptar')
    run([ptarchive, 'embed', newer, '--symbols', os.path.join(work, 'syms'), '-o', out])
    run([ptarchive, 'verify', out])
    after = chunks(out)
    if (12, unknown) not in after or after.index((12, unknown)) != len(listed) - 1:
        raise Failure('the unknown chunk was not kept in place byte for byte')
    cut = os.path.join(work, 'cut.ptar')
    open(cut, 'wb').write(data[:end_at])
    out = os.path.join(work, 'cut-embedded.ptar')
    r = run([ptarchive, 'embed', cut, '--symbols', os.path.join(work, 'syms'), '-o', out])
    want = f'  note: {cut} has no End chunk (a cut-off capture); the output stays incomplete'
    if want not in r.stdout.splitlines():
        raise Failure(f'no incomplete note in:\n{r.stdout}')
    if [c[0] for c in chunks(out)] != [c[0] for c in listed[:-1]] + [6]:
        raise Failure(f'cut-off archive: chunk types {[c[0] for c in chunks(out)]}')


def check_damaged(tools, work, archive):
    emulate, ptarchive, decode = tools
    data = bytearray(open(archive, 'rb').read())
    header_size = struct.unpack_from('<H', data, 14)[0]
    # Flip a payload byte of the second chunk.
    first_stored = struct.unpack_from('<Q', data, header_size + 8)[0]
    second = header_size + 32 + (first_stored + 7) // 8 * 8
    stored = struct.unpack_from('<Q', data, second + 8)[0]
    data[second + 32] ^= 0xFF
    bad = os.path.join(work, 'bad.ptar')
    open(bad, 'wb').write(bytes(data))
    r = run([ptarchive, 'embed', bad, '--symbols', os.path.join(work, 'syms')], expect_rc=1)
    want = (f'pt-archive: {bad}: damaged [{second:#x}, {second + 32 + (stored + 7) // 8 * 8:#x}): '
            f'chunk 1 at offset {second:#x}: payload checksum mismatch')
    if not r.stderr.startswith(want) or r.stderr.count('\n') != 1:
        raise Failure(f'damage message {r.stderr!r} does not start with {want!r}')
    if open(bad, 'rb').read() != bytes(data):
        raise Failure('a refused archive was modified')
    text = os.path.join(work, 'not-an-archive.ptar')
    open(text, 'w').write('hello\n')
    r = run([ptarchive, 'embed', text, '--symbols', work], expect_rc=1)
    if not r.stderr.startswith(f'pt-archive: {text}: ') or r.stderr.count('\n') != 1:
        raise Failure(f'bad message for a non-archive: {r.stderr!r}')


def main():
    emulate, ptarchive, decode, program, program_v2 = (os.path.abspath(a) for a in sys.argv[1:6])
    tools = (emulate, ptarchive, decode)
    with tempfile.TemporaryDirectory(prefix='embed_test_') as work:
        syms = os.path.join(work, 'syms')
        run_dir = os.path.join(work, 'run')
        os.makedirs(syms)
        os.makedirs(run_dir)
        shutil.copy(program, os.path.join(syms, 'embed_program'))
        recorded = os.path.join(run_dir, 'embed_program')
        run(['strip', '-o', recorded, program])
        stripped = os.path.join(work, 'embed_program.stripped')
        shutil.copy(recorded, stripped)
        want_id = build_id(recorded)
        archive = os.path.join(work, 'capture.ptar')
        run([emulate, '--full', '-o', archive, '--', recorded])
        os.unlink(recorded)
        try:
            # Without the binary nothing names the program's functions: the checks below can fail.
            if 'embed_middle' in tree_of_main(decode, archive, work, expect_rc=3):
                raise Failure('the stripped, deleted program was named before embedding')
            check_refuse(tools, work, archive, program_v2, recorded, want_id)
            libs = check_recorded_paths(tools, work, archive, recorded)
            once = check_embed(tools, work, libs, syms, recorded, want_id)
            check_idempotent(tools, work, once)
            check_debug_info(tools, work, archive, stripped, syms, want_id)
            check_unknown_and_incomplete(tools, work, libs)
            check_damaged(tools, work, archive)
        except Failure as e:
            print(f'FAIL {e}')
            return 1
    print('PASS pt-archive embed: refuse, embed, idempotent, debug info, unknown chunks, '
          'cut-off and damaged input')
    return 0


if __name__ == '__main__':
    sys.exit(main())
