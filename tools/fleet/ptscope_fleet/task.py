"""One archive's task, run on a Dask worker: decide from a content key whether its outputs are up
to date and, when not, decode it with pt-decode into temporary files that are renamed into place.

This module is shipped to the workers by value (cloudpickle), so workers need only python3,
python3-distributed and pt-decode: it imports nothing but the standard library, and nothing of
ptscope_fleet.

Per archive NAME the output directory holds
  NAME.summary.json   pt-decode --summary --format json (always: `ptscope-fleet summary` reads it)
  NAME.pftrace        (or .txt / .folded) the trace, unless the format is "none"
  NAME.fleet.json     the record: content key, status, pt-decode's messages; written last
Every file is written under a temporary name in the same directory and renamed over the final
name (atomic on POSIX), so a worker killed mid-task, or a task run twice, never leaves a torn
output: a reader sees the old file or the new one. The record is renamed into place after the
outputs, so a record always describes outputs that exist.
"""
import hashlib
import json
import os
import shutil
import socket
import subprocess
import time
import uuid

RECORD_VERSION = 1
TRACE_EXTENSIONS = {'perfetto': '.pftrace', 'text': '.txt', 'folded': '.folded'}
SUMMARY_EXTENSION = '.summary.json'
RECORD_EXTENSION = '.fleet.json'
TEMP_MARK = '.fleet-tmp'
STDERR_LIMIT = 16384  # bytes of pt-decode's messages kept per output


def output_names(name, trace_format):
    """The files an archive named NAME produces: the summary first, then the trace."""
    names = [name + SUMMARY_EXTENSION]
    if trace_format != 'none':
        names.append(name + TRACE_EXTENSIONS[trace_format])
    return names


def temp_path(final_path, run_id):
    """A temporary name beside FINAL_PATH that no other attempt uses; `run_id` lets the client
    remove what the attempts of its run left behind (a killed worker cannot)."""
    directory, base = os.path.split(final_path)
    return os.path.join(directory, '.%s.%s.%s%s' % (base, run_id, uuid.uuid4().hex[:12], TEMP_MARK))


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, 'rb') as f:
        while True:
            block = f.read(1 << 20)
            if not block:
                return digest.hexdigest()
            digest.update(block)


def file_identity(entry, with_time):
    """What a resolved file contributes to the key: what it is, not where it lies, so that workers
    seeing the same files under other paths (or copies made at other times) agree. A file is
    only ever used when its build id matches the capture's, so its code is fixed by that id; its
    names depend on which sections it keeps (symbol table, DWARF), which its size and flags say.
    Files of modules recorded without a build id are also keyed by path and modification time."""
    if entry is None:
        return None
    identity = {k: entry.get(k) for k in ('build_id', 'size', 'symtab', 'debug_info')}
    if with_time:
        identity.update(path=entry.get('path'), mtime_ns=entry.get('mtime_ns'))
    return identity


def content_key(archive_sha256, modules, trace_format):
    """sha256 over everything the outputs are a function of: the archive's bytes, the decoder
    (its build id), the output formats and, per module the archive maps, the files pt-decode
    resolves for it (code, debug info, DWARF package; null when missing)."""
    parts = {
        'archive_sha256': archive_sha256,
        'pt_decode': modules.get('pt_decode'),
        'formats': ['summary-json', trace_format],
        'modules': [],
    }
    for m in modules.get('modules', []):
        with_time = not m.get('build_id')
        parts['modules'].append({
            'path': m.get('path'),
            'build_id': m.get('build_id'),
            'code': file_identity(m.get('code'), with_time),
            'debug': file_identity(m.get('debug'), with_time),
            'dwp': file_identity(m.get('dwp'), True),
        })
    parts['modules'].sort(key=lambda p: (p['path'] or '', p['build_id'] or ''))
    blob = json.dumps(parts, sort_keys=True, separators=(',', ':')).encode()
    return hashlib.sha256(blob).hexdigest()


def decode_args(job):
    args = []
    for directory in job['symbols']:
        args += ['--symbols', directory]
    for url in job['debuginfod']:
        args += ['--debuginfod', url]
    return args


def dies_with_worker():
    """util-linux's setpriv, when the worker has it, makes pt-decode get SIGKILL when the worker
    thread that started it dies (PR_SET_PDEATHSIG): a killed worker leaves no orphan pt-decode
    that goes on using a core and writing a file nobody will rename. (The thread lives as long as
    the task: Dask's pool threads run one task at a time.)"""
    setpriv = shutil.which('setpriv')
    return [setpriv, '--pdeathsig', 'KILL', '--'] if setpriv else []


def run_pt_decode(job, args):
    started = time.monotonic()
    proc = subprocess.run(dies_with_worker() + [job['pt_decode']] + args, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, check=False)
    return proc, time.monotonic() - started


def message_of(stderr):
    text = stderr.decode('utf-8', 'replace')
    if len(text) > STDERR_LIMIT:
        text = text[:STDERR_LIMIT] + '\n[... cut: %d more bytes]\n' % (len(text) - STDERR_LIMIT)
    return text


def fsync_path(path, directory=False):
    fd = os.open(path, (os.O_RDONLY | os.O_DIRECTORY) if directory else os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path, data, run_id):
    temp = temp_path(path, run_id)
    with open(temp, 'wb') as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temp, path)


def read_record(path):
    try:
        with open(path, 'rb') as f:
            record = json.load(f)
        return record if record.get('version') == RECORD_VERSION else None
    except (OSError, ValueError):
        return None


def up_to_date(record, key, output_dir, outputs):
    return (record is not None and record.get('key') == key and record.get('status') in (0, 3)
            and record.get('outputs') == outputs
            and all(os.path.isfile(os.path.join(output_dir, o)) for o in outputs))


def worker_address():
    try:
        from distributed import get_worker
        return get_worker().address
    except (ImportError, ValueError):  # not on a Dask worker (a direct call)
        return None


def result(job, state, status, started, **fields):
    fields.update(archive=job['archive'], name=job['name'], state=state, status=status,
                  host=socket.gethostname(), worker=worker_address(),
                  seconds=round(time.monotonic() - started, 6))
    return fields


def decode_archive(job):
    """Runs on a worker. `job`: archive, name, output_dir, pt_decode, symbols, debuginfod,
    format, decode_jobs, run_id, force. Returns a dict (never raises for a bad archive):
    state 'decoded' | 'skipped' | 'failed', status (pt-decode's exit status, or 1), message,
    instructions, key."""
    started = time.monotonic()
    archive, output_dir, name = job['archive'], job['output_dir'], job['name']
    host = socket.gethostname()
    if not os.path.isdir(output_dir):
        return result(job, 'failed', 1, started,
                      message='output directory %s does not exist on worker %s: the archives and '
                              'the output directory must be on a path every worker sees' %
                              (output_dir, host))
    if shutil.which(job['pt_decode']) is None:
        return result(job, 'failed', 1, started,
                      message='%s is not an executable on worker %s: install pt-decode there, or '
                              'pass --pt-decode with its path on the workers' %
                              (job['pt_decode'], host))
    try:
        archive_sha256 = sha256_file(archive)
    except OSError as e:
        return result(job, 'failed', 1, started,
                      message='%s: cannot read the archive on worker %s: %s' %
                              (archive, host, e.strerror or e))
    proc, _ = run_pt_decode(job, ['--list-modules'] + decode_args(job) + [archive])
    if proc.returncode not in (0, 3):  # 3: a damaged archive; the decode reports the damage
        return result(job, 'failed', proc.returncode, started, message=message_of(proc.stderr))
    try:
        modules = json.loads(proc.stdout)
    except ValueError as e:
        return result(job, 'failed', 1, started,
                      message='%s: pt-decode --list-modules printed no JSON (%s): is %s an older '
                              'pt-decode?' % (archive, e, job['pt_decode']))
    outputs = output_names(name, job['format'])
    key = content_key(archive_sha256, modules, job['format'])
    record_path = os.path.join(output_dir, name + RECORD_EXTENSION)
    record = read_record(record_path)
    if not job.get('force') and up_to_date(record, key, output_dir, outputs):
        return result(job, 'skipped', record['status'], started, key=key,
                      message=record.get('message', ''),
                      instructions=record.get('instructions', 0))
    return decode_outputs(job, started, archive_sha256, key, outputs, modules)


def decode_outputs(job, started, archive_sha256, key, outputs, modules):
    """One pt-decode run writes the JSON summary and, unless the format is none, the trace
    (--summary-json: one decode, both outputs exactly as each alone), to temporary names; they
    are renamed into place only when pt-decode says 0 or 3."""
    archive, output_dir, run_id = job['archive'], job['output_dir'], job['run_id']
    temps = [(temp_path(os.path.join(output_dir, o), run_id), os.path.join(output_dir, o))
             for o in outputs]
    summary_temp = temps[0][0]  # output_names puts the summary first
    if len(temps) == 1:
        args = ['--summary', '--format', 'json', '-o', summary_temp]
    else:
        args = ['--format', job['format'], '-o', temps[1][0], '--summary-json', summary_temp]
    try:
        proc, decode_seconds = run_pt_decode(
            job, args + decode_args(job) + ['--jobs', str(job['decode_jobs']), archive])
        message = message_of(proc.stderr)
        if proc.returncode not in (0, 3):
            return result(job, 'failed', proc.returncode, started, key=key, message=message)
        instructions = summary_instructions(summary_temp)
        for temp, final in temps:
            fsync_path(temp)
            os.replace(temp, final)
        fsync_path(output_dir, directory=True)
        temps = []
        record = {
            'version': RECORD_VERSION, 'key': key, 'archive': archive,
            'archive_sha256': archive_sha256, 'status': proc.returncode, 'outputs': outputs,
            'instructions': instructions, 'message': message, 'pt_decode': modules.get('pt_decode'),
            'modules': modules.get('modules', []), 'host': socket.gethostname(),
            'decode_seconds': round(decode_seconds, 6),
        }
        write_atomically(os.path.join(output_dir, job['name'] + RECORD_EXTENSION),
                         json.dumps(record, indent=1, sort_keys=True).encode() + b'\n', run_id)
        return result(job, 'decoded', proc.returncode, started, key=key, message=message,
                      instructions=instructions, decode_seconds=decode_seconds)
    except OSError as e:
        return result(job, 'failed', 1, started,
                      message='%s: writing the outputs in %s failed: %s' %
                              (archive, output_dir, e.strerror or e))
    finally:
        for temp, _ in temps:
            try:
                os.unlink(temp)
            except OSError:
                pass


def summary_instructions(path):
    """Instructions decoded, from pt-decode's JSON summary (0 when unreadable). pt-decode writes
    the "capture" object before the function tables (docs/DECODE_JSON.md), so only the head of
    a summary of any size is parsed; the whole file only if the head does not hold it."""
    try:
        with open(path, 'rb') as f:
            head = f.read(8192).decode('utf-8', 'replace')
            at = head.find('"capture": {')
            if at >= 0 and at < head.find('"functions"'):
                capture, _ = json.JSONDecoder().raw_decode(head, at + len('"capture": '))
            else:
                f.seek(0)
                capture = json.load(f).get('capture', {})
        return int(capture.get('instructions', 0))
    except (OSError, ValueError, TypeError, AttributeError):
        return 0


def scheduler_has_bokeh():
    """Run on the scheduler: whether it can serve Dask's graphical dashboard."""
    import importlib.util
    return importlib.util.find_spec('bokeh') is not None
