"""ptscope-fleet's pure parts, without Dask or pt-decode: input expansion and output names,
manifests, the content key, the exit-status order, the summary's reduction and percentiles, the
plain progress log.

  fleet_units_test.py TOOLS_FLEET_DIR
"""
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, sys.argv.pop(1))
from ptscope_fleet import inputs, progress, run, summary, task  # noqa: E402


class Inputs(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name
        for rel in ('a/cap.ptar', 'b/cap.ptar', 'b/other.ptar', 'c/x.data', 'c/notes.txt'):
            path = os.path.join(self.root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, 'w').close()

    def tearDown(self):
        self.dir.cleanup()

    def test_names_follow_pt_decode_and_collisions_get_a_stable_suffix(self):
        paths = inputs.collect_archives([os.path.join(self.root, '*/*.ptar'),
                                         os.path.join(self.root, 'c/x.data')], [])
        names = inputs.output_names(paths)
        self.assertEqual(names[os.path.join(self.root, 'b/other.ptar')], 'other')
        self.assertEqual(names[os.path.join(self.root, 'c/x.data')], 'x')
        a, b = (names[os.path.join(self.root, d, 'cap.ptar')] for d in 'ab')
        self.assertNotEqual(a, b)
        self.assertRegex(a, r'^cap-[0-9a-f]{8}$')
        self.assertEqual(inputs.output_names(list(reversed(paths))), names)

    def test_duplicates_by_real_path_are_decoded_once(self):
        os.symlink(os.path.join(self.root, 'a/cap.ptar'), os.path.join(self.root, 'link.ptar'))
        paths = inputs.collect_archives([os.path.join(self.root, 'a/cap.ptar'),
                                         os.path.join(self.root, 'link.ptar')], [])
        self.assertEqual(paths, [os.path.join(self.root, 'a/cap.ptar')])

    def test_manifest_comments_relative_paths_and_globs(self):
        manifest = os.path.join(self.root, 'list.txt')
        with open(manifest, 'w') as f:
            f.write('# archives of host b\n\nb/*.ptar\n  c/x.data  \n')
        paths = inputs.collect_archives([], [manifest])
        self.assertEqual(paths, [os.path.join(self.root, p)
                                 for p in ('b/cap.ptar', 'b/other.ptar', 'c/x.data')])

    def test_a_manifest_line_that_names_nothing_is_a_usage_error_with_its_line(self):
        manifest = os.path.join(self.root, 'list.txt')
        with open(manifest, 'w') as f:
            f.write('b/cap.ptar\nmissing.ptar\n')
        with self.assertRaisesRegex(inputs.UsageError, r'list.txt line 2: .*missing.ptar does '
                                                       r'not exist'):
            inputs.collect_archives([], [manifest])
        with self.assertRaisesRegex(inputs.UsageError, r"no file matches .*nothing\*"):
            inputs.collect_archives([os.path.join(self.root, 'nothing*')], [])
        with self.assertRaisesRegex(inputs.UsageError, r'is a directory'):
            inputs.collect_archives([os.path.join(self.root, 'a')], [])


def modules(debug_size=100, symtab=True, code_path='/lib/libx.so', build_id='ab12'):
    entry = {'build_id': build_id, 'size': 50, 'symtab': False, 'debug_info': False,
             'path': code_path, 'mtime_ns': 1}
    debug = {'build_id': build_id, 'size': debug_size, 'symtab': symtab, 'debug_info': True,
             'path': '/syms/libx.debug', 'mtime_ns': 2}
    return {'pt_decode': {'version': '0.1.0', 'build_id': 'ff'},
            'modules': [{'path': '/lib/libx.so', 'build_id': build_id, 'code': entry,
                         'debug': debug, 'dwp': None}]}


class ContentKey(unittest.TestCase):
    def key(self, archive='aa', mods=None, fmt='perfetto'):
        return task.content_key(archive, mods or modules(), fmt)

    def test_what_changes_the_names_changes_the_key(self):
        base = self.key()
        self.assertEqual(base, self.key())
        self.assertNotEqual(base, self.key(archive='bb'))
        self.assertNotEqual(base, self.key(fmt='text'))
        self.assertNotEqual(base, self.key(mods=modules(debug_size=101)))
        self.assertNotEqual(base, self.key(mods=modules(symtab=False)))
        newer = modules()
        newer['pt_decode']['build_id'] = 'fe'
        self.assertNotEqual(base, self.key(mods=newer))
        missing = modules()
        missing['modules'][0]['debug'] = None
        self.assertNotEqual(base, self.key(mods=missing))

    def test_where_a_file_with_a_build_id_lies_does_not(self):
        self.assertEqual(self.key(), self.key(mods=modules(code_path='/mnt/other/libx.so')))

    def test_files_without_build_id_are_keyed_by_path_and_time(self):
        a = self.key(mods=modules(build_id=''))
        self.assertNotEqual(a, self.key(mods=modules(build_id='', code_path='/other/libx.so')))


class SummaryInstructions(unittest.TestCase):
    def read(self, text):
        with tempfile.NamedTemporaryFile('w', suffix='.json', delete=False) as f:
            f.write(text)
        try:
            return task.summary_instructions(f.name)
        finally:
            os.unlink(f.name)

    def test_from_the_head_or_from_the_whole_document(self):
        rows = ', '.join('{"function": "f%d", "calls": 1}' % i for i in range(2000))
        self.assertEqual(self.read('{"schema": "ptscope-summary", "version": 1,\n "capture": '
                                   '{"threads": 1, "instructions": 4590, "gaps": {"overflow": 0}},'
                                   '\n "functions": [%s]}' % rows), 4590)
        # Members in another order (a producer other than pt-decode): the whole file is read.
        self.assertEqual(self.read('{"functions": [%s], "capture": {"instructions": 77}}' % rows),
                         77)
        self.assertEqual(self.read('{"capture": {"instructions": 5}'), 0)  # cut short
        self.assertEqual(self.read('not json'), 0)


class Statuses(unittest.TestCase):
    def test_worst_is_usage_then_failed_then_partial_then_complete(self):
        self.assertEqual(run.worst([]), 0)
        self.assertEqual(run.worst([0, 0]), 0)
        self.assertEqual(run.worst([0, 3, 0]), 3)
        self.assertEqual(run.worst([3, 1, 0]), 1)
        self.assertEqual(run.worst([1, 2, 3]), 2)


def document(rows):
    return {'schema': 'ptscope-summary', 'version': 1, 'functions': [
        dict(module=m, function=f, inlined=i, calls=c, total_ns=t, self_ns=s, max_ns=x,
             insns=n, self_insns=n) for m, f, i, c, t, s, x, n in rows]}


class Summary(unittest.TestCase):
    def test_nearest_rank(self):
        values = list(range(1, 101))
        self.assertEqual(summary.nearest_rank(values, 50), 50)
        self.assertEqual(summary.nearest_rank(values, 99), 99)
        self.assertEqual(summary.nearest_rank([7], 99), 7)
        self.assertEqual(summary.nearest_rank([1, 2], 50), 1)
        self.assertEqual(summary.nearest_rank([1, 2], 99), 2)

    def test_reduce_sums_counts_captures_and_takes_percentiles_of_maxima(self):
        docs = [('one', document([('a.so', 'f', False, 2, 100, 60, 70, 10),
                                  ('a.so', 'f', True, 1, 5, 5, 5, 1)])),
                ('two', document([('a.so', 'f', False, 3, 300, 200, 150, 30),
                                  ('b.so', 'g', False, 1, 1000, 1000, 1000, 99)])),
                ('three', document([('a.so', 'f', False, 1, 10, 10, 10, 5)]))]
        rows = summary.reduce(docs)
        self.assertEqual([(r['module'], r['function'], r['inlined']) for r in rows],
                         [('b.so', 'g', False), ('a.so', 'f', False), ('a.so', 'f', True)])
        f = rows[1]
        self.assertEqual((f['captures'], f['calls'], f['total_ns'], f['self_ns'], f['insns']),
                         (3, 6, 410, 270, 45))
        self.assertEqual((f['max_ns_p50'], f['max_ns_p99'], f['max_ns_max']), (70, 150, 150))

    def test_unreadable_summaries_are_left_out_and_named(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, 'good.summary.json'), 'w') as f:
                json.dump(document([('a.so', 'f', False, 1, 1, 1, 1, 1)]), f)
            with open(os.path.join(d, 'old.summary.json'), 'w') as f:
                f.write('{"schema": "ptscope-summary", "version": 99, "functions": []}')
            out, err = io.StringIO(), io.StringIO()
            status = summary.summarize(d, os.path.join(d, 'fleet-summary'), 5, out, err)
            self.assertEqual(status, 3)
            self.assertIn('old.summary.json: summary version 99', err.getvalue())
            self.assertIn('1 captures, 1 functions', out.getvalue())
            with open(os.path.join(d, 'fleet-summary.csv')) as f:
                self.assertEqual(f.read().splitlines(), [
                    ','.join(summary.CSV_COLUMNS), 'a.so,f,0,1,1,1,1,1,1,1,1,1'])


class Progress(unittest.TestCase):
    def test_plain_log_has_one_line_per_archive_and_the_failures(self):
        stream = io.StringIO()
        p = progress.Progress(3, stream, terminal=False)
        p.start()
        p.update({'archive': '/a.ptar', 'state': 'decoded', 'status': 0, 'instructions': 1234,
                  'seconds': 0.5, 'host': 'h'})
        p.update({'archive': '/b.ptar', 'state': 'skipped', 'status': 0, 'host': 'h'})
        p.update({'archive': '/c.ptar', 'state': 'failed', 'status': 1, 'host': 'h',
                  'message': '\npt-decode: /c.ptar: not an archive\nmore\n'})
        p.close()
        lines = stream.getvalue().splitlines()
        self.assertEqual(lines[0], 'ptscope-fleet: [1/3] /a.ptar decoded, 1,234 instructions in '
                                   '0.50 s (on h)')
        self.assertEqual(lines[1], 'ptscope-fleet: [2/3] /b.ptar up to date (on h)')
        self.assertEqual(lines[2], 'ptscope-fleet: [3/3] FAILED /c.ptar (status 1): pt-decode: '
                                   '/c.ptar: not an archive')
        self.assertRegex(lines[3], r'^ptscope-fleet: 3/3  decoded 1  up to date 1  failed 1  ')
        self.assertEqual(len(lines), 4)


if __name__ == '__main__':
    unittest.main(verbosity=2)
