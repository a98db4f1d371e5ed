"""ptscope-fleet's command line: `decode` and `summary`."""
import argparse
import os
import shutil
import sys

from . import inputs

DESCRIPTION = """\
Decode many ptscope captures on a Dask cluster, each archive one task running pt-decode on a
worker, and reduce their summaries into one table of where the time went.
Exit status: 0 complete, 3 some archive decoded only in part, 1 some archive failed, 2 usage."""

DECODE_EPILOG = """\
Without --scheduler a Dask LocalCluster runs on this machine. With --scheduler, the archives, the
output directory and every --symbols directory must be visible to every worker at the same path
(a shared file system), and pt-decode must be installed on the workers (--pt-decode names it).
An output is decoded again only when its archive's bytes, pt-decode, the output format or the
files pt-decode resolves for the archive's modules changed (NAME.fleet.json keeps the key).
See docs/FLEET.md."""


class Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(2, '%s: %s (try --help)\n' % (self.prog, message))


def positive(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError('%r is not a whole number' % text) from None
    if value < 1:
        raise argparse.ArgumentTypeError('%r must be at least 1' % text)
    return value


def build_parser(default_pt_decode, version='unknown'):
    parser = Parser(prog='ptscope-fleet', description=DESCRIPTION,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--version', action='version', version='ptscope-fleet ' + version)
    commands = parser.add_subparsers(dest='command', metavar='COMMAND', parser_class=Parser)
    commands.required = True
    d = commands.add_parser('decode', help='decode archives, one Dask task each',
                            description='Decode archives with pt-decode, one Dask task each.',
                            epilog=DECODE_EPILOG,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    d.add_argument('archives', nargs='*', metavar='ARCHIVE',
                   help='archive paths or globs (quote them to have ** recurse)')
    d.add_argument('--manifest', action='append', default=[], metavar='FILE',
                   help='file listing archive paths or globs, one per line (# comments; relative '
                        'to the file; - for standard input); repeatable')
    d.add_argument('--output-dir', '-O', required=True, metavar='DIR',
                   help='where NAME.summary.json, NAME.pftrace and NAME.fleet.json are written '
                        '(created if missing)')
    d.add_argument('--symbols', action='append', default=[], metavar='DIR',
                   help='directory of binaries/debug files, passed to pt-decode; repeatable')
    d.add_argument('--debuginfod', action='append', default=[], metavar='URL',
                   help='debuginfod server, passed to pt-decode; repeatable')
    d.add_argument('--scheduler', metavar='tcp://HOST:PORT',
                   help='a running Dask scheduler (default: a LocalCluster on this machine)')
    d.add_argument('--format', default='perfetto', choices=['perfetto', 'text', 'folded', 'none'],
                   help='trace written beside the JSON summary (default perfetto; none: only '
                        'the summary)')
    d.add_argument('--local-workers', type=positive, default=os.cpu_count() or 1, metavar='N',
                   help='LocalCluster only: archives decoded at once (default: every core)')
    d.add_argument('--decode-jobs', type=positive, default=1, metavar='N',
                   help="pt-decode's --jobs per task (default 1: a core per archive)")
    d.add_argument('--pt-decode', default=default_pt_decode, metavar='PATH',
                   help='pt-decode as the workers run it (default %(default)s)')
    d.add_argument('--force', action='store_true',
                   help='decode every archive again, even when its outputs are up to date')
    d.add_argument('--report', metavar='FILE',
                   help="write every archive's outcome (state, status, message) as JSON")
    d.add_argument('--no-progress', action='store_true',
                   help='no live progress bar on a terminal: one line per archive instead')
    s = commands.add_parser('summary', help='one table per function over every capture',
                            description='Reduce OUTDIR/*.summary.json into one table per function '
                                        '(module, function) over every capture.')
    s.add_argument('output_dir', metavar='OUTDIR')
    s.add_argument('--output', '-o', metavar='PREFIX',
                   help='write PREFIX.csv and PREFIX.json (default OUTDIR/fleet-summary)')
    s.add_argument('--top', type=int, default=25, metavar='N',
                   help='rows of the terminal table (default 25; 0 = all)')
    return parser


def main(argv=None, default_pt_decode='pt-decode', version='unknown'):
    args = build_parser(default_pt_decode, version).parse_args(argv)
    if args.command == 'summary':
        from . import summary
        prefix = args.output or os.path.join(args.output_dir, 'fleet-summary')
        return summary.summarize(args.output_dir, prefix, args.top, sys.stdout, sys.stderr)
    try:
        archives = inputs.collect_archives(args.archives, args.manifest)
        if not archives:
            raise inputs.UsageError('no archive given: name archives, globs or --manifest FILE')
        args.output_dir = os.path.abspath(args.output_dir)
        os.makedirs(args.output_dir, exist_ok=True)
    except inputs.UsageError as e:
        print('ptscope-fleet decode: %s' % e, file=sys.stderr)
        return 2
    except OSError as e:
        print('ptscope-fleet decode: --output-dir %s: %s' % (args.output_dir, e.strerror or e),
              file=sys.stderr)
        return 2
    args.symbols = [os.path.abspath(d) for d in args.symbols]
    for directory in args.symbols:
        if not os.path.isdir(directory):
            print('ptscope-fleet decode: --symbols %s is not a directory' % directory,
                  file=sys.stderr)
            return 2
    if not args.scheduler and os.sep in args.pt_decode:
        args.pt_decode = os.path.abspath(args.pt_decode)
    if not args.scheduler and shutil.which(args.pt_decode) is None:
        print('ptscope-fleet decode: pt-decode not found at %s (pass --pt-decode PATH)' %
              args.pt_decode, file=sys.stderr)
        return 2
    from . import run
    run.import_dask()
    try:
        return run.decode(args, archives, inputs.output_names(archives))
    except run.SchedulerUnreachable as e:
        print('ptscope-fleet decode: %s' % e, file=sys.stderr)
        return 1
