#!/usr/bin/env python3
"""Packaging for production hosts (issue #27).

  install   `meson install` into a DESTDIR: every tool and its man page; pt-record static and
            stripped, its debug info in bin/.debug/pt-record.debug, found through its
            .gnu_debuglink by elfutils (eu-addr2line names main); every tool's --version names
            the version and the installed file's build id; the installed ptscope-fleet runs
  release   scripts/release: the tarball holds exactly the listed files under
            ptscope-VERSION-ARCH-linux/, SHA256SUMS checks them all (and catches a changed byte),
            host/pt-record is static and stripped and its debug link resolves beside it

  install_test.py PART SOURCE_DIR BUILD_DIR VERSION PT_RECORD_UNSTRIPPED BUILD_KIND
BUILD_KIND: plain, or sanitized (-Dsanitize=true, scripts/test --sanitize): there pt-record is
linked dynamically, since ASan's runtime cannot be linked into a static binary, so the checks
that it is static and needs no shared library are left out (and said to be); everything else
is checked the same.
"""
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zlib

TOOLS = ['pt-record', 'pt-emulate', 'pt-decode', 'pt-archive', 'ptscope-fleet']


class Failure(Exception):
    pass


def run(cmd, expect_rc=0, **kwargs):
    r = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if expect_rc is not None and r.returncode != expect_rc:
        raise Failure(f'{" ".join(cmd)} exited {r.returncode} (expected {expect_rc}):\n'
                      f'{r.stdout}{r.stderr}')
    return r


def build_id(path):
    m = re.search(r'Build ID: ([0-9a-f]+)', run(['readelf', '-n', path]).stdout)
    return m.group(1) if m else None


def sections(path):
    return set(re.findall(r'^\s*\[\s*\d+\]\s+(\S+)', run(['readelf', '-SW', path]).stdout, re.M))


SANITIZED = False  # BUILD_KIND sanitized: pt-record is dynamic there (see the docstring)


def check_host_binary(binary, debug, unstripped):
    """pt-record as shipped: static, stripped, its debug file linked and found."""
    if SANITIZED:
        print(f'{binary}: sanitizer build, linked dynamically: static linking not checked')
    elif 'statically linked' not in run(['file', '-L', binary]).stdout:
        raise Failure(f'{binary} is not statically linked')
    elif run(['readelf', '-d', binary]).stdout.count('NEEDED'):
        raise Failure(f'{binary} needs shared libraries')
    have = sections(binary)
    if '.symtab' in have or any(s.startswith('.debug_') for s in have):
        raise Failure(f'{binary} is not stripped: {sorted(have)}')
    if '.debug_info' not in sections(debug):
        raise Failure(f'{debug} holds no DWARF')
    want_id = build_id(unstripped)
    if not want_id or build_id(binary) != want_id or build_id(debug) != want_id:
        raise Failure(f'build ids differ: {unstripped} {want_id}, {binary} {build_id(binary)}, '
                      f'{debug} {build_id(debug)}')
    # .gnu_debuglink: the file name, NUL padding to 4 bytes, then the CRC-32 of the debug file
    # (read from readelf's hex dump: objcopy --dump-section would rewrite the binary).
    # Each line: two spaces, the offset, then 16 bytes as 4 hex groups in columns 13-47.
    dump = bytes.fromhex(''.join(
        line[13:48].replace(' ', '') for line in run(['readelf', '-x', '.gnu_debuglink', binary])
        .stdout.splitlines() if line.startswith('  0x')))
    link_name = dump.split(b'\0', 1)[0].decode()
    crc = int.from_bytes(dump[-4:], 'little')
    if link_name != os.path.basename(debug) or crc != zlib.crc32(open(debug, 'rb').read()):
        raise Failure(f'.gnu_debuglink {link_name!r} CRC {crc:#x} does not name {debug}')
    # A real consumer follows the link: elfutils names main from the debug file alone.
    main = re.search(r'^([0-9a-f]+) \w+ main$', run(['nm', unstripped]).stdout, re.M)
    names = run(['eu-addr2line', '-f', '-e', binary, '0x' + main.group(1)]).stdout.split()
    if not names or names[0] != 'main':
        raise Failure(f'eu-addr2line did not find main through the debug link: {names}')


def check_version(tool, version, path):
    out = run([path, '--version']).stdout.strip()
    if tool == 'ptscope-fleet':
        want = f'ptscope-fleet {version}'
    else:
        want = f'{tool} {version} (build id {build_id(path)})'
    if out != want:
        raise Failure(f'{path} --version printed {out!r}, expected {want!r}')


def part_install(source, build, version, unstripped):
    with tempfile.TemporaryDirectory(prefix='install_test_') as destdir:
        env = dict(os.environ, DESTDIR=destdir)
        run(['meson', 'install', '-C', build, '--no-rebuild', '--quiet'], env=env)
        prefix = run(['meson', 'introspect', build, '--buildoptions']).stdout
        prefix = re.search(r'"name": "prefix", "value": "([^"]+)"', prefix).group(1)
        root = destdir + prefix
        for tool in TOOLS:
            path = os.path.join(root, 'bin', tool)
            if not os.access(path, os.X_OK):
                raise Failure(f'{tool} was not installed at {path}')
            page = os.path.join(root, 'share', 'man', 'man1', tool + '.1')
            text = open(page).read() if os.path.exists(page) else ''
            if not text.startswith('.\\" DO NOT MODIFY THIS FILE!  It was generated by help2man') \
                    or f'.TH {tool.upper()} "1"' not in text or '\\-\\-help' not in text:
                raise Failure(f'no help2man page for {tool} at {page}')
            check_version(tool, version, path)
        page = open(os.path.join(root, 'share', 'man', 'man1', 'pt-record.1')).read()
        if '\\-\\-check' not in page or '\\-\\-snapshot\\-size' not in page:
            raise Failure('pt-record.1 lacks the options of pt-record --help')
        check_host_binary(os.path.join(root, 'bin', 'pt-record'),
                          os.path.join(root, 'bin', '.debug', 'pt-record.debug'), unstripped)
        r = run([os.path.join(root, 'bin', 'ptscope-fleet'), 'decode', '--help'])
        if '--pt-decode' not in r.stdout:
            raise Failure(f'installed ptscope-fleet decode --help:\n{r.stdout}')


def part_release(source, build, version, unstripped):
    arch = os.uname().machine
    name = f'ptscope-{version}-{arch}-linux'
    with tempfile.TemporaryDirectory(prefix='release_test_') as work:
        out = os.path.join(work, 'dist')
        run([os.path.join(source, 'scripts', 'release'), '--builddir', build, '--out', out],
            cwd=source)
        tarball = os.path.join(out, name + '.tar.xz')
        with tarfile.open(tarball) as tar:
            members = sorted(m.name for m in tar.getmembers() if m.isfile())
            tar.extractall(work)
        fleet = sorted(f'{name}/share/ptscope/ptscope_fleet/{f}' for f in
                       os.listdir(os.path.join(source, 'tools', 'fleet', 'ptscope_fleet'))
                       if f.endswith('.py'))
        want = sorted([f'{name}/README.md', f'{name}/SHA256SUMS', f'{name}/host/pt-record',
                       f'{name}/host/pt-record.debug'] +
                      [f'{name}/bin/{t}' for t in TOOLS if t != 'pt-record'] +
                      [f'{name}/share/man/man1/{t}.1' for t in TOOLS] + fleet)
        if members != want:
            raise Failure(f'tarball members {members}, expected {want}')
        top = os.path.join(work, name)
        r = run(['sha256sum', '-c', 'SHA256SUMS'], cwd=top)
        if r.stdout.count(': OK') != len(want) - 1:
            raise Failure(f'SHA256SUMS does not cover every file:\n{r.stdout}')
        # The checksums can fail: one changed byte in README.md.
        with open(os.path.join(top, 'README.md'), 'a') as f:
            f.write(' ')
        if run(['sha256sum', '-c', '--quiet', 'SHA256SUMS'], cwd=top, expect_rc=1).stdout.strip() \
                != 'README.md: FAILED':
            raise Failure('a changed README.md passed sha256sum -c')
        check_host_binary(os.path.join(top, 'host', 'pt-record'),
                          os.path.join(top, 'host', 'pt-record.debug'), unstripped)
        check_version('pt-record', version, os.path.join(top, 'host', 'pt-record'))
        for tool in TOOLS[1:]:
            check_version(tool, version, os.path.join(top, 'bin', tool))


def main():
    global SANITIZED
    part, source, build, version, unstripped, kind = sys.argv[1:7]
    if kind not in ('plain', 'sanitized'):
        print(f'FAIL: BUILD_KIND must be plain or sanitized, not {kind}')
        return 2
    SANITIZED = kind == 'sanitized'
    try:
        {'install': part_install, 'release': part_release}[part](
            os.path.abspath(source), os.path.abspath(build), version, os.path.abspath(unstripped))
    except Failure as e:
        print(f'FAIL {part}: {e}')
        return 1
    print(f'PASS {part}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
