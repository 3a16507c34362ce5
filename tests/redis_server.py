"""A real Redis server for the remote-cache tests: Debian's ``redis-server`` started on
127.0.0.1 at a free port with no persistence, and stopped after the test.  Without the program
the tests that need it skip, saying how to install it (CI installs it: .ci/run)."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time

import pytest


class RedisServer:
    def __init__(self, directory: str):
        program = shutil.which("redis-server")
        if program is None:
            pytest.skip("redis-server is not installed (apt-get install -y redis-server)")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.process = subprocess.Popen(
            [program, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", directory, "--protected-mode", "yes"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.client = __import__("redis").Redis(host="127.0.0.1", port=self.port)
        deadline = time.monotonic() + 10
        while True:
            try:
                self.client.ping()
                return
            except Exception:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.stop()
                    raise RuntimeError("redis-server did not start")
                time.sleep(0.02)

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): connections open, no answers -- a slow server."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        self.client.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait(timeout=10)
