"""A server process a test session starts (llama.cpp's): up, answering, and alive.

When the process dies, a test fails with one line saying so (its exit status, the
signal's name, the last lines of its log), not with the connection errors of every
request that follows: the llama.cpp server built for a CPU's AMX, on a VM that has not
enabled it, starts, answers ``/models``, and dies of SIGILL on its first completion.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import pytest

#: Log lines quoted in the one-line message, and at most this many characters of them.
TAIL_LINES = 4
TAIL_CHARS = 600


class ServerProcess:
    """``cmd`` started with its output in ``log``; ``name`` is what messages call it."""

    def __init__(self, cmd: Sequence[str], log: Path, name: str) -> None:
        self.log, self.name = log, name
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT)

    def death(self) -> str | None:
        """One line when the process has ended: its status and its log's last lines."""
        status = self.proc.poll()
        if status is None:
            return None
        how = f"exited with status {status}"
        if status < 0:
            try:
                how = f"was killed by {signal.Signals(-status).name} (status {status})"
            except ValueError:
                pass
        try:
            lines = [ln.strip() for ln in self.log.read_text(errors="replace").splitlines()]
        except OSError:
            lines = []
        tail = " | ".join([ln for ln in lines if ln][-TAIL_LINES:])[-TAIL_CHARS:]
        return f"the {self.name} {how}; its log ({self.log}) ends: {tail or '(empty)'}"

    def check(self) -> None:
        """Fail the test, in one line, if the process has died."""
        said = self.death()
        if said is not None:
            pytest.fail(said, pytrace=False)

    def wait_until_up(self, url: str, timeout: float = 120.0) -> None:
        """Until ``url`` answers 200; one line if the process dies first or time runs out."""
        deadline = time.monotonic() + timeout
        while True:
            self.check()
            if time.monotonic() > deadline:
                pytest.fail(f"the {self.name} did not answer {url} within {timeout:.0f} s; "
                            f"its log: {self.log}", pytrace=False)
            try:
                with urllib.request.urlopen(url, timeout=2) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.25)

    def first_completion(self, base_url: str, model: str, timeout: float = 120.0) -> None:
        """Ask for one token: where the server's kernels first run, and where a build for
        instructions this machine cannot run dies. One line if it does."""
        body = {"model": model, "messages": [{"role": "user", "content": "Hi"}],
                "max_tokens": 1, "temperature": 0.0}
        request = urllib.request.Request(
            f"{base_url}/chat/completions", data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as reply:
                reply.read()
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            error = exc
        # Out of the except block, so that the one line is not chained to the request's.
        self._await_end(5.0)
        self.check()
        pytest.fail(f"the {self.name} did not answer a first completion: {error}; "
                    f"its log: {self.log}", pytrace=False)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def _await_end(self, seconds: float) -> None:
        """A process that dropped a connection as it died may take a moment to be reaped."""
        try:
            self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            pass
