"""`ptscope-fleet decode`: one Dask task per archive, results gathered as they finish."""
import contextlib
import glob
import json
import logging
import os
import sys
import time
import uuid

from . import task
from .progress import Progress, first_line

# Exit statuses (every ptscope tool): 0 complete, 3 written but partial, 1 failed, 2 usage.
# A batch returns the worst; "worse" is this order.
SEVERITY = {0: 0, 3: 1, 1: 2, 2: 3}


def worst(statuses):
    return max(statuses, key=lambda s: SEVERITY.get(s, 2), default=0)


def import_dask():
    try:
        import distributed  # noqa: F401
        import cloudpickle  # noqa: F401
    except ImportError as e:
        raise SystemExit('ptscope-fleet: cannot import Dask distributed (%s): install Debian\'s '
                         'python3-distributed (scripts/setup does) and run ptscope-fleet with '
                         '/usr/bin/python3' % e)


class SchedulerUnreachable(Exception):
    pass


@contextlib.contextmanager
def connect(scheduler, local_workers):
    """A Client on `scheduler`, or on a LocalCluster of this machine when none is given: one
    worker process (its nanny restarts it if it dies) with a thread per task slot, since every
    task's work happens in a pt-decode child process."""
    import distributed
    if scheduler:
        try:
            # Dask's own connect timeout (distributed.comm.timeouts.connect, 30 s by default).
            client = distributed.Client(scheduler)
        except (OSError, ValueError) as e:  # unreachable (a TimeoutError is an OSError), or bad
            raise SchedulerUnreachable('cannot reach the Dask scheduler at %s: %s (is it running, '
                                       'and is the address tcp://HOST:PORT?)' % (scheduler, e))
        with client:
            yield client
        return
    with contextlib.ExitStack() as stack:
        cluster = stack.enter_context(distributed.LocalCluster(
            n_workers=1, threads_per_worker=local_workers, processes=True, host='127.0.0.1',
            dashboard_address='127.0.0.1:0', silence_logs=logging.ERROR))
        client = stack.enter_context(distributed.Client(cluster))
        client.wait_for_workers(1)
        yield client


def print_dashboard(client, err):
    """Dask serves its dashboard from the scheduler's HTTP server; without bokeh (Debian 12 does
    not package it) that server still serves the plain task and worker pages under /info."""
    try:
        info = client.scheduler_info()
        port = info.get('services', {}).get('dashboard')
    except Exception:  # a scheduler that does not answer is reported by the run itself
        return
    if not port:
        print('ptscope-fleet: the scheduler runs no dashboard', file=err)
        return
    host = client.scheduler.address.split('://', 1)[-1].rsplit(':', 1)[0]
    base = 'http://%s:%s' % (host, port)
    try:  # (task's code travels by value: the scheduler needs no copy of ptscope_fleet)
        has_bokeh = client.run_on_scheduler(task.scheduler_has_bokeh)
    except Exception:  # a scheduler that refuses to run functions: say what may be there
        has_bokeh = None
    if has_bokeh is None:
        print('ptscope-fleet: Dask dashboard: %s/status (or, without bokeh, %s/info/main/'
              'workers.html)' % (base, base), file=err)
    elif has_bokeh:
        print('ptscope-fleet: Dask dashboard: %s/status' % base, file=err)
    else:
        print('ptscope-fleet: Dask dashboard: %s/info/main/workers.html (tasks and workers; the '
              'graphical /status page needs bokeh, which the scheduler lacks)' % base, file=err)


def task_key(job):
    # Dask shows keys in its dashboard and logs: name the archive.
    return 'ptscope-decode-%s-%s' % (job['name'], job['run_id'])


def outcome_of(future, job):
    """The task's result, or a failure naming what Dask reported (a worker that died on every
    attempt: KilledWorker)."""
    try:
        return future.result()
    except Exception as e:  # the task itself never raises for a bad archive
        import distributed
        if isinstance(e, distributed.scheduler.KilledWorker):
            message = ('every worker that ran this task died (%d attempts, Dask\'s '
                       'distributed.scheduler.allowed-failures + 1): pt-decode or the worker '
                       'may be running out of memory on it (KilledWorker)' % (e.args[2] + 1))
        else:
            message = '%s: %s' % (type(e).__name__, e)
        return {'archive': job['archive'], 'name': job['name'], 'state': 'failed', 'status': 1,
                'message': message, 'host': '?', 'seconds': 0.0}


def remove_temporaries(output_dir, run_id):
    """Temporary files of this run's attempts that a killed worker could not remove, and those
    of the pt-decode it ran (pt-decode writes beside the path it is given, '.NAME.XXXXXX', and
    renames when done)."""
    pattern = os.path.join(glob.escape(output_dir), '.*.%s.*%s*' % (run_id, task.TEMP_MARK))
    for path in glob.glob(pattern):
        with contextlib.suppress(OSError):
            os.unlink(path)


def decode(args, archives, names, out=sys.stdout, err=sys.stderr):
    import cloudpickle
    import distributed
    # Workers need no copy of ptscope_fleet: the task's code travels with it.
    cloudpickle.register_pickle_by_value(task)
    run_id = uuid.uuid4().hex[:12]
    jobs = [{
        'archive': archive, 'name': names[archive], 'output_dir': args.output_dir,
        'pt_decode': args.pt_decode, 'symbols': args.symbols, 'debuginfod': args.debuginfod,
        'format': args.format, 'decode_jobs': args.decode_jobs, 'run_id': run_id,
        'force': args.force,
    } for archive in archives]
    terminal = err.isatty() and not args.no_progress
    outcomes = []
    started = time.monotonic()
    try:
        with connect(args.scheduler, args.local_workers) as client:
            workers = client.scheduler_info().get('workers', {})
            threads = sum(w.get('nthreads', 0) for w in workers.values())
            print('ptscope-fleet: %d archive%s on %s (%d worker%s, %d thread%s)' % (
                len(jobs), '' if len(jobs) == 1 else 's', client.scheduler.address, len(workers),
                '' if len(workers) == 1 else 's', threads, '' if threads == 1 else 's'), file=err)
            if not workers:
                print('ptscope-fleet: the scheduler has no workers yet; waiting for some to join',
                      file=err)
            print_dashboard(client, err)
            progress = Progress(len(jobs), err, terminal)
            progress.start()
            futures, interrupted = [], False
            try:
                futures = client.map(task.decode_archive, jobs, key=[task_key(j) for j in jobs],
                                     pure=False)
                job_of = {f.key: j for f, j in zip(futures, jobs)}
                for future in distributed.as_completed(futures):
                    outcome = outcome_of(future, job_of[future.key])
                    outcomes.append(outcome)
                    progress.update(outcome)
                    future.release()
            except KeyboardInterrupt:
                # Tasks not started are dropped; one already running finishes its archive whole
                # (its outputs appear atomically, or not at all when its worker is stopped with us).
                interrupted = True
                client.cancel(futures)
            finally:
                progress.close()
    finally:
        # Only now, with the local cluster's worker stopped: the pt-decode a cancelled task was
        # running dies with it (SIGKILL, dies_with_worker) and leaves its own temporary file, which
        # a clean-up made before the shutdown would miss.
        remove_temporaries(args.output_dir, run_id)
    order = {job['archive']: i for i, job in enumerate(jobs)}
    outcomes.sort(key=lambda o: order[o['archive']])
    status = report(outcomes, time.monotonic() - started, err)
    if interrupted:
        print('ptscope-fleet: interrupted after %d of %d archives; the finished ones are kept: '
              'the same command decodes the rest' % (len(outcomes), len(jobs)), file=err)
        status = worst([status, 1])
    if args.report:
        write_report(args.report, outcomes, status)
    return status


def report(outcomes, seconds, err):
    """The final report: totals, then every archive that failed or is partial, with pt-decode's
    message. Returns the run's exit status (the worst of the archives')."""
    decoded = [o for o in outcomes if o['state'] == 'decoded']
    skipped = [o for o in outcomes if o['state'] == 'skipped']
    failed = [o for o in outcomes if o['state'] == 'failed']
    partial = [o for o in outcomes if o['state'] != 'failed' and o['status'] == 3]
    instructions = sum(o.get('instructions', 0) for o in decoded)
    print('ptscope-fleet: %d decoded, %d up to date, %d partial, %d failed; %s instructions '
          'decoded in %.1f s' % (len(decoded), len(skipped), len(partial), len(failed),
                                 '{:,}'.format(instructions), seconds), file=err)
    for o in partial:
        print('  partial (status 3): %s: %s' % (o['archive'], first_line(o.get('message'))),
              file=err)
    for o in failed:
        message = (o.get('message') or '').strip().replace('\n', '\n      ')
        print('  FAILED (status %d): %s:\n      %s' % (o['status'], o['archive'], message),
              file=err)
    return worst(o['status'] for o in outcomes)


def write_report(path, outcomes, status):
    """Every archive's outcome as JSON (for scripts and the tests)."""
    document = {'version': 1, 'status': status, 'archives': outcomes}
    temp = path + '.tmp'
    with open(temp, 'w', encoding='utf-8') as f:
        json.dump(document, f, indent=1, sort_keys=True)
        f.write('\n')
    os.replace(temp, path)
