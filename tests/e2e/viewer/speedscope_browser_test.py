#!/usr/bin/env python3
"""The offline viewer, in a real browser (issue #27).

Records the demo program with pt-emulate, decodes it with `pt-decode --format speedscope`, serves
speedscope's own release (the npm package scripts/setup installs into build/npm) and the profile
from a loopback HTTP server, opens it in headless Chromium (Debian's chromium, driven over the
DevTools protocol on a pipe) and checks from the page itself that speedscope rendered the decoded
functions and the thread: the page title, the profile's name in the toolbar and the function
names of the sandwich view's table. A screenshot is kept as the test's artifact.

  speedscope_browser_test.py PT_EMULATE PT_DECODE DEMO_PROGRAM SPEEDSCOPE_DIR CHROMIUM OUT_DIR
"""
import fcntl
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import time

# The functions of tools/demo/demo_program.c (all of them run), and libc's exit.
EXPECTED_FUNCTIONS = ['main', 'handle_request', 'validate', 'route', 'price_level',
                      'rebuild_checksums', 'mix', 'exit']


class Failure(Exception):
    pass


class DevTools:
    """Chromium's DevTools protocol over --remote-debugging-pipe: JSON messages ending in NUL,
    written to the browser's fd 3 and read from its fd 4."""

    def __init__(self, chromium, profile_dir):
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # The child gets the pipes as fds 3 and 4 (moved out of the way first: either may already
        # be 3 or 4); pass_fds keeps those numbers open past the close of every other fd.
        def child_fds():
            high_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)
        self.proc = subprocess.Popen(
            [chromium, '--headless', '--remote-debugging-pipe', '--no-sandbox',
             '--disable-gpu', '--use-angle=swiftshader', '--enable-unsafe-swiftshader',
             '--no-first-run', '--no-default-browser-check', '--disable-extensions',
             '--user-data-dir=' + profile_dir, '--window-size=1400,900', 'about:blank'],
            pass_fds=(3, 4), preexec_fn=child_fds,
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(profile_dir, 'chromium.log'), 'w'))
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b''
        self._next_id = 0
        self.session = None

    def send(self, method, params=None, timeout=30):
        self._next_id += 1
        message = {'id': self._next_id, 'method': method, 'params': params or {}}
        if self.session:
            message['sessionId'] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b'\0')
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get('id') == self._next_id:
                if 'error' in reply:
                    raise Failure('%s: %s' % (method, reply['error']))
                return reply.get('result', {})

    def _read(self, deadline):
        import select
        while b'\0' not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise Failure('chromium did not answer in time')
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise Failure('chromium closed the DevTools pipe (exit %s)' % self.proc.poll())
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b'\0', 1)
        return json.loads(message)

    def open_page(self, url):
        target = self.send('Target.createTarget', {'url': 'about:blank'})['targetId']
        self.session = self.send('Target.attachToTarget',
                                 {'targetId': target, 'flatten': True})['sessionId']
        self.send('Page.enable')
        self.send('Runtime.enable')
        self.send('Page.navigate', {'url': url})

    def evaluate(self, expression):
        result = self.send('Runtime.evaluate', {'expression': expression, 'returnByValue': True})
        if 'exceptionDetails' in result:
            raise Failure('page script failed: %s' % result['exceptionDetails'])
        return result['result'].get('value')

    def screenshot(self, path):
        import base64
        data = self.send('Page.captureScreenshot', {'format': 'png'})['data']
        with open(path, 'wb') as f:
            f.write(base64.b64decode(data))

    def close(self):
        try:
            self.session = None
            self.send('Browser.close', timeout=5)
        except Failure:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def serve(directory):
    handler = functools.partial(QuietHandler, directory=directory)
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def wait_for(devtools, expression, what, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = devtools.evaluate(expression)
        if value:
            return value
        time.sleep(0.25)
    text = devtools.evaluate('document.body ? document.body.innerText : ""')
    raise Failure('%s not rendered within %d s; the page shows:\n%s' % (what, timeout, text[:2000]))


# The text nodes now in the page: the table is virtual (only the visible rows are in the DOM).
VISIBLE_TEXTS = """(() => {
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const texts = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.nodeValue.trim();
    if (text) texts.push(text);
  }
  return texts;
})()"""
# The table's scrolling element (the tallest scrollable one), scrolled by a page; true at the end.
SCROLL_PAGE = """(() => {
  const all = Array.from(document.querySelectorAll("*")).filter(e => e.scrollHeight > e.clientHeight + 4 &&
      ["auto", "scroll"].includes(getComputedStyle(e).overflowY));
  if (all.length === 0) return true;
  const table = all.reduce((a, b) => (b.scrollHeight > a.scrollHeight ? b : a));
  const before = table.scrollTop;
  table.scrollTop = before + table.clientHeight;
  return table.scrollTop === before;
})()"""


def table_names(devtools):
    """Every text the sandwich table renders, scrolling it from top to bottom."""
    seen = set()
    for _ in range(500):
        seen.update(devtools.evaluate(VISIBLE_TEXTS))
        at_end = devtools.evaluate(SCROLL_PAGE)
        time.sleep(0.15)  # speedscope renders the rows of the new position on the next frame
        if at_end:
            seen.update(devtools.evaluate(VISIBLE_TEXTS))
            return seen
    raise Failure('the sandwich table did not reach its end after 500 pages')


def main():
    pt_emulate, pt_decode, demo, speedscope_dir, chromium, out_dir = sys.argv[1:7]
    index = os.path.join(speedscope_dir, 'index.html')
    if not os.path.isfile(index):
        raise Failure('speedscope is not installed at %s: run scripts/setup (it installs the '
                      'speedscope npm package into build/npm)' % speedscope_dir)
    if not shutil.which(chromium):
        raise Failure('%s not found: run scripts/setup (it installs Debian\'s chromium)' % chromium)
    work = os.path.join(out_dir, 'speedscope_browser')
    shutil.rmtree(work, ignore_errors=True)
    site = os.path.join(work, 'site')
    shutil.copytree(speedscope_dir, site)

    archive = os.path.join(work, 'demo.ptar')
    r = subprocess.run([pt_emulate, '--full', '-o', archive, '--', demo], capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise Failure('pt-emulate exited %d:\n%s' % (r.returncode, r.stderr))
    profile = os.path.join(site, 'demo.speedscope.json')
    r = subprocess.run([pt_decode, '-o', profile, archive], capture_output=True, text=True)
    if r.returncode != 0 or '(speedscope)' not in r.stderr:
        raise Failure('pt-decode -o demo.speedscope.json exited %d:\n%s' % (r.returncode, r.stderr))
    with open(profile) as f:
        document = json.load(f)
    profiles = document['profiles']
    if len(profiles) != 1:
        raise Failure('the demo has one thread, the profile %d' % len(profiles))
    thread_name = profiles[0]['name']  # "demo-program PID/TID"
    if not thread_name.startswith('demo-program '):
        raise Failure('profile name %r does not name the demo thread' % thread_name)

    server = serve(site)
    browser_dir = os.path.join(work, 'chromium')
    os.makedirs(browser_dir)
    devtools = DevTools(chromium, browser_dir)
    try:
        url = 'http://127.0.0.1:%d/index.html#profileURL=%s&view=sandwich' % (
            server.server_address[1], '/demo.speedscope.json')
        devtools.open_page(url)
        # speedscope names the page after the profile it loaded.
        wait_for(devtools, 'document.title === %s' % json.dumps(thread_name + ' - speedscope'),
                 'the page title "%s - speedscope"' % thread_name)
        body = 'document.body.innerText'
        wait_for(devtools, '%s.includes(%s)' % (body, json.dumps(thread_name)),
                 'the thread name %r in the toolbar' % thread_name)
        wait_for(devtools, '%s.includes("Symbol Name")' % body, 'the sandwich table')
        shown = table_names(devtools)
        missing = [name for name in EXPECTED_FUNCTIONS if name not in shown]
        if missing:
            raise Failure('the sandwich table lacks %s; it shows %s' % (missing, sorted(shown)))
        if len(shown) < len({f['name'] for f in document['shared']['frames']}) // 2:
            raise Failure('the sandwich table shows %d names of the profile\'s %d' %
                          (len(shown), len(document['shared']['frames'])))
        shot = os.path.join(out_dir, 'speedscope-demo.png')
        devtools.screenshot(shot)
        # The artifact: the timeline (speedscope's "Time Order" view, drawn with WebGL).
        devtools.evaluate('Array.from(document.querySelectorAll("div, button, span")).filter(e => '
                          'e.textContent.includes("Time Order")).pop().click()')
        wait_for(devtools, 'document.querySelector("canvas") !== null', 'the flame chart canvas')
        time.sleep(1)
        shot = os.path.join(out_dir, 'speedscope-demo.png')
        devtools.screenshot(shot)
        if os.path.getsize(shot) < 10000:
            raise Failure('the screenshot %s is nearly empty' % shot)
        errors = devtools.evaluate('document.body.innerText.includes("Something went wrong")')
        if errors:
            raise Failure('speedscope reports an error on the page')
    finally:
        devtools.close()
        server.shutdown()
    print('PASS: speedscope shows %r and %s; screenshot %s' % (thread_name, EXPECTED_FUNCTIONS, shot))


if __name__ == '__main__':
    try:
        main()
    except Failure as e:
        print('FAIL: %s' % e)
        sys.exit(1)
