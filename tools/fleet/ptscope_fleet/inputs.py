"""Which archives a run decodes (globs, manifest files) and the output name of each."""
import glob
import hashlib
import os
import sys


class UsageError(Exception):
    """A mistake in the command line or a manifest: exit status 2."""


def expand_pattern(pattern, origin):
    """Paths a command-line argument or manifest line names: a glob (`**` recurses), or a path,
    which must exist. `origin` says where the pattern came from, for messages."""
    if glob.has_magic(pattern):
        matches = sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))
        if not matches:
            raise UsageError('%s: no file matches %r' % (origin, pattern))
        return matches
    if not os.path.exists(pattern):
        raise UsageError('%s: %s does not exist' % (origin, pattern))
    if os.path.isdir(pattern):
        raise UsageError('%s: %s is a directory; give its archives, e.g. %r' %
                         (origin, pattern, os.path.join(pattern, '*.ptar')))
    return [pattern]


def read_manifest(path):
    """A manifest: one archive path or glob per line; blank lines and lines starting with '#' are
    ignored; relative paths are relative to the manifest's directory. '-' reads standard input."""
    if path == '-':
        lines, base, label = sys.stdin.read().splitlines(), os.getcwd(), 'standard input'
    else:
        try:
            with open(path, encoding='utf-8') as f:
                lines = f.read().splitlines()
        except OSError as e:
            raise UsageError('--manifest %s: %s' % (path, e.strerror or e)) from None
        except UnicodeDecodeError:
            raise UsageError('--manifest %s: not a text file (one archive path per line)' %
                             path) from None
        base, label = os.path.dirname(os.path.abspath(path)), path
    paths = []
    for number, line in enumerate(lines, 1):
        entry = line.strip()
        if not entry or entry.startswith('#'):
            continue
        if not os.path.isabs(entry):
            entry = os.path.join(base, entry)
        paths += expand_pattern(entry, '%s line %d' % (label, number))
    return paths


def collect_archives(patterns, manifests):
    """Absolute, de-duplicated archive paths in the order given."""
    paths = []
    for pattern in patterns:
        paths += expand_pattern(pattern, 'argument')
    for manifest in manifests:
        paths += read_manifest(manifest)
    seen, unique = set(), []
    for path in paths:
        absolute = os.path.abspath(path)
        real = os.path.realpath(absolute)
        if real not in seen:
            seen.add(real)
            unique.append(absolute)
    return unique


def stem(path):
    """pt-decode's output naming: the file name without .ptar or .data."""
    base = os.path.basename(path)
    for extension in ('.ptar', '.data'):
        if base.endswith(extension) and len(base) > len(extension):
            return base[:-len(extension)]
    return base


def output_names(archives):
    """archive path -> output name. The name is the archive's stem, as `pt-decode --output-dir`
    names it; archives whose stems collide (cap.ptar from two hosts' directories) are told apart
    by the first 8 hex digits of the sha256 of their absolute path, which stays the same from run
    to run, so the incremental record beside each output keeps matching."""
    by_stem = {}
    for archive in archives:
        by_stem.setdefault(stem(archive), []).append(archive)
    names = {}
    for name, group in by_stem.items():
        for archive in group:
            if len(group) == 1:
                names[archive] = name
            else:
                digest = hashlib.sha256(archive.encode()).hexdigest()[:8]
                names[archive] = '%s-%s' % (name, digest)
    return names
