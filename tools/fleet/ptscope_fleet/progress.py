"""Progress of a run: a live bar on a terminal, one plain line per archive otherwise."""
import threading
import time


def count(value):
    return '{:,}'.format(value)


def rate(value):
    for scale, unit in ((1e9, 'G'), (1e6, 'M'), (1e3, 'k')):
        if value >= scale:
            return '%.1f %s' % (value / scale, unit)
    return '%.0f' % value


def first_line(message):
    for line in (message or '').splitlines():
        if line.strip():
            return line.strip()
    return ''


class Progress:
    """Counts finished archives. `update` is called from the client's result loop; on a terminal
    a thread redraws the bar twice a second so that the rate and the clock move between results.
    Failures and partial decodes are printed as lines above the bar as they happen."""

    BAR = 24

    def __init__(self, total, stream, terminal, log_every_archive=True):
        self.total, self.stream, self.terminal = total, stream, terminal
        self.log_every_archive = log_every_archive
        self.decoded = self.partial = self.skipped = self.failed = 0
        self.instructions = 0
        self.started = time.monotonic()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = None
        self.drawn = False

    def start(self):
        if self.terminal:
            self.thread = threading.Thread(target=self._tick, name='ptscope-fleet-progress',
                                           daemon=True)
            self.thread.start()

    def _tick(self):
        while not self.stop.wait(0.5):
            with self.lock:
                self._draw()

    def finished(self):
        return self.decoded + self.skipped + self.failed

    def line(self):
        elapsed = max(time.monotonic() - self.started, 1e-9)
        done = self.finished()
        filled = self.BAR * done // self.total if self.total else self.BAR
        text = '[%s%s] %d/%d  decoded %d' % ('#' * filled, '.' * (self.BAR - filled), done,
                                            self.total, self.decoded)
        if self.partial:
            text += ' (%d partial)' % self.partial
        text += '  up to date %d  failed %d  %s insns/s  %.0f s' % (
            self.skipped, self.failed, rate(self.instructions / elapsed), elapsed)
        return text

    def _draw(self):
        self.stream.write('\r\x1b[K' + self.line())
        self.stream.flush()
        self.drawn = True

    def _print(self, text):
        if self.terminal and self.drawn:
            self.stream.write('\r\x1b[K')
        self.stream.write(text + '\n')
        if self.terminal:
            self._draw()
        self.stream.flush()

    def update(self, outcome):
        with self.lock:
            state, status = outcome['state'], outcome['status']
            if state == 'failed':
                self.failed += 1
            elif state == 'skipped':
                self.skipped += 1
            else:
                self.decoded += 1
                self.instructions += outcome.get('instructions', 0)
            if state == 'decoded' and status == 3:
                self.partial += 1
            position = '[%d/%d]' % (self.finished(), self.total)
            if state == 'failed':
                self._print('ptscope-fleet: %s FAILED %s (status %d): %s' % (
                    position, outcome['archive'], status, first_line(outcome.get('message'))))
            elif status == 3 and state == 'decoded':
                self._print('ptscope-fleet: %s partial %s (status 3): %s' % (
                    position, outcome['archive'], first_line(outcome.get('message'))))
            elif not self.terminal and self.log_every_archive:
                if state == 'skipped':
                    what = 'up to date'
                else:
                    what = 'decoded, %s instructions in %.2f s' % (
                        count(outcome.get('instructions', 0)), outcome.get('seconds', 0.0))
                self._print('ptscope-fleet: %s %s %s (on %s)' % (
                    position, outcome['archive'], what, outcome.get('host', '?')))
            elif self.terminal:
                self._draw()

    def close(self):
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
        with self.lock:
            if self.terminal:
                self._draw()
                self.stream.write('\n')
            else:
                self.stream.write('ptscope-fleet: ' + self.line().split('] ', 1)[1] + '\n')
            self.stream.flush()
