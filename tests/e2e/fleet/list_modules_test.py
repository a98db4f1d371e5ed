"""pt-decode --list-modules: every module a capture maps and the files a decode would use for it
(what ptscope-fleet keys its outputs on), checked against readelf and stat, never against
pt-decode itself.

  list_modules_test.py --decode PT_DECODE --emulate PT_EMULATE --archive PT_ARCHIVE
      --program fnptr=PATH

A capture of fnptr whose binary was stripped after it ran (as production binaries are):
- the listing: schema and version 1, pt-decode's version and own build id (readelf), one entry
  per mapped module: the program with its build id, found at the recorded path (its real path,
  size and mtime as stat says), no symbol table, its debug info the code file itself; the
  [vdso] from the archive (no path); ld.so and libc found at their recorded paths with their
  build ids;
- with --symbols naming a directory holding the unstripped copy: the program's debug file is
  that copy (origin "--symbols", symbol table and DWARF), every other module's entry unchanged;
- after `pt-archive embed`: the code comes from the archive (origin "archive", path and mtime
  null, the embedded copy's size);
- with the binary gone and no copy anywhere: code and debug are null;
- a file that is no archive: exit 1 with the message a decode gives; an archive cut short: a
  whole listing and exit 3 (what it maps after the damage is not listed).
"""
import argparse
import json
import os
import pathlib
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet_common import (check, damage, emulate, main_guard, require_tools, run,  # noqa: E402
                          run_ok)


def readelf_build_id(path):
    for line in run_ok(['readelf', '-n', path]).stdout.splitlines():
        if 'Build ID:' in line:
            return line.split()[-1]
    return ''


def listing(decode, archive, *extra):
    r = run([decode, '--list-modules'] + list(extra) + [archive])
    check(r.returncode == 0, '--list-modules %s: exit %d: %s' % (archive, r.returncode, r.stderr))
    return json.loads(r.stdout)


def by_path(document):
    return {m['path']: m for m in document['modules']}


def expect_file(entry, path, origin, symtab, debug_info, what):
    st = os.stat(path)
    want = {'origin': origin, 'path': os.path.realpath(path), 'size': st.st_size,
            'mtime_ns': st.st_mtime_ns, 'build_id': readelf_build_id(path), 'symtab': symtab,
            'debug_info': debug_info}
    check(entry == want, '%s: %s, want %s' % (what, entry, want))


def main():
    p = argparse.ArgumentParser()
    for option in ('--decode', '--emulate', '--archive'):
        p.add_argument(option, required=True)
    p.add_argument('--program', action='append', default=[])
    a = p.parse_args()
    programs = dict(item.split('=', 1) for item in a.program)
    require_tools(a.decode, a.emulate, a.archive, programs['fnptr'])
    tmp = tempfile.mkdtemp(prefix='ptscope-list-modules-')
    try:
        binary, symbols = os.path.join(tmp, 'bin', 'fnptr'), os.path.join(tmp, 'symbols')
        os.makedirs(os.path.dirname(binary))
        os.makedirs(symbols)
        shutil.copy2(programs['fnptr'], binary)
        archive = os.path.join(tmp, 'fnptr.ptar')
        emulate(a.emulate, binary, archive)
        run_ok(['objcopy', '--strip-all', binary])
        unstripped = os.path.join(symbols, 'fnptr-unstripped')
        shutil.copy2(programs['fnptr'], unstripped)
        build_id = readelf_build_id(binary)
        check(build_id and build_id == readelf_build_id(unstripped), 'strip changed the build id')

        document = listing(a.decode, archive)
        check((document['schema'], document['version']) == ('ptscope-modules', 1),
              'header: %s %s' % (document['schema'], document['version']))
        check(document['pt_decode']['build_id'] == readelf_build_id(a.decode),
              'pt_decode build id %s, readelf says %s' % (document['pt_decode']['build_id'],
                                                         readelf_build_id(a.decode)))
        modules = by_path(document)
        check(len(modules) == len(document['modules']), 'a module is listed twice')
        program = modules.get(binary)
        check(program is not None, 'the program is not listed: %s' % sorted(modules))
        check(program['build_id'] == build_id, 'program build id %s, readelf %s' %
              (program['build_id'], build_id))
        expect_file(program['code'], binary, 'recorded path', False, False, 'program code')
        expect_file(program['debug'], binary, 'code file', False, False, 'program debug')
        check(program['dwp'] is None, 'program dwp: %s' % program['dwp'])
        vdso = modules.get('[vdso]')
        check(vdso is not None and vdso['code']['origin'] == 'archive' and
              vdso['code']['path'] is None, '[vdso]: %s' % vdso)
        libraries = [m for m in modules if os.path.basename(m).startswith(('ld-linux', 'libc.so'))]
        check(len(libraries) == 2, 'ld.so and libc are not both listed: %s' % sorted(modules))
        for path in libraries:
            entry = modules[path]
            check(entry['build_id'] == readelf_build_id(path), '%s: build id' % path)
            check(entry['code']['origin'] == 'recorded path' and
                  entry['code']['path'] == os.path.realpath(path), '%s: code %s' %
                  (path, entry['code']))

        with_symbols = by_path(listing(a.decode, archive, '--symbols', symbols))
        expect_file(with_symbols[binary]['debug'], unstripped, '--symbols', True, True,
                    'program debug with --symbols')
        check(with_symbols[binary]['code'] == program['code'], 'code changed with --symbols')
        for path, entry in modules.items():
            if path != binary:
                check(with_symbols[path] == entry, '%s changed with --symbols' % path)

        embedded = os.path.join(tmp, 'embedded.ptar')
        run_ok([a.archive, 'embed', archive, '--symbols', symbols, '-o', embedded])
        code = by_path(listing(a.decode, embedded))[binary]['code']
        check(code == {'origin': 'archive', 'path': None, 'size': os.stat(unstripped).st_size,
                       'mtime_ns': None, 'build_id': build_id, 'symtab': True,
                       'debug_info': True}, 'embedded code: %s' % code)

        os.unlink(binary)
        gone = by_path(listing(a.decode, archive))[binary]
        check(gone['code'] is None and gone['debug'] is None, 'missing binary: %s' % gone)

        garbage = os.path.join(tmp, 'garbage.ptar')
        pathlib.Path(garbage).write_bytes(b'not an archive\n' * 8)
        listed = run([a.decode, '--list-modules', garbage])
        decoded = run([a.decode, '-o', os.path.join(tmp, 'g.pftrace'), garbage])
        check(listed.returncode == 1 and listed.stderr == decoded.stderr and not listed.stdout,
              'garbage: exit %d, %r (a decode says %r)' % (listed.returncode, listed.stderr,
                                                          decoded.stderr))
        cut = os.path.join(tmp, 'cut.ptar')
        damage(archive, cut)
        r = run([a.decode, '--list-modules', cut])
        check(r.returncode == 3, 'cut archive: exit %d, want 3: %s' % (r.returncode, r.stderr))
        json.loads(r.stdout)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    main_guard(main)
