"""A real elfutils `debuginfod` on 127.0.0.1 for a test: serves the ELF files under a directory
(-F), with an in-memory index, until stopped. Used as a context manager:

    with DebuginfodServer(directory, wait_for_build_id=hex) as url: ...
    with DebuginfodServer(directory, [hex1, hex2], artifact='debuginfo') as url: ...

Raises RuntimeError when debuginfod is not installed (scripts/setup installs it) or does not
serve the build id within `seconds`: a missing prerequisite fails the test, never skips it."""
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def wait_for(url, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.3)
    return False


class DebuginfodServer:
    def __init__(self, directory, wait_for_build_id, seconds=60, artifact='executable'):
        self.directory, self.seconds, self.artifact = directory, seconds, artifact
        self.build_ids = ([wait_for_build_id] if isinstance(wait_for_build_id, str)
                          else list(wait_for_build_id))
        self.process = None

    def __enter__(self):
        if shutil.which('debuginfod') is None:
            raise RuntimeError('debuginfod is not installed (scripts/setup installs it)')
        port = free_port()
        self.process = subprocess.Popen(
            ['debuginfod', '-F', '-p', str(port), '-d', ':memory:', '-t', '0', self.directory],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        url = 'http://127.0.0.1:%d' % port
        for build_id in self.build_ids:
            if not wait_for('%s/buildid/%s/%s' % (url, build_id, self.artifact), self.seconds):
                self.__exit__(None, None, None)
                raise RuntimeError('debuginfod did not serve the %s of build id %s within %d s' %
                                   (self.artifact, build_id, self.seconds))
        return url

    def __exit__(self, *exc):
        if self.process is None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.process = None
