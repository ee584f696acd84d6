"""The LLM server fixture's helper fails in one line when the server dies (issue 44, item 1).

The llama.cpp server built for AMX, on a VM that has not enabled AMX, answered
``/models`` and died of SIGILL on its first completion; every test after it then failed
with a connection error. Here stand-in servers die the same ways, at once and at their
first completion, and the helper must say so in one line: the status, the signal, the
end of the log.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from server_harness import ServerProcess

#: Answers GET /v1/models like llama.cpp's server; dies of SIGILL on the first POST.
DIES_AT_FIRST_COMPLETION = r"""
import http.server, os, signal, sys

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"object": "list", "data": [{"id": "m"}]}')

    def do_POST(self):
        print("ggml_backend_amx_mul_mat: running", flush=True)
        os.kill(os.getpid(), signal.SIGILL)

    def log_message(self, *args):
        pass

print("load_tensors: AMX model buffer size = 95.34 MiB", flush=True)
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def failure(call: object) -> str:
    with pytest.raises(pytest.fail.Exception) as info:
        call()  # type: ignore[operator]
    # Not chained to a connection error: pytest would print that one first.
    assert info.value.__context__ is None or info.value.__suppress_context__
    return str(info.value)


def test_a_server_that_dies_at_once_fails_in_one_line(tmp_path: Path) -> None:
    script = ("import os, signal; print('llama_model_loader: loaded meta data', flush=True); "
              "print('error: illegal instruction ahead', flush=True); "
              "os.kill(os.getpid(), signal.SIGILL)")
    server = ServerProcess([sys.executable, "-c", script], tmp_path / "server.log",
                           "llama.cpp server")
    try:
        said = failure(lambda: server.wait_until_up(f"http://127.0.0.1:{free_port()}/v1/models"))
    finally:
        server.stop()
    assert "\n" not in said
    assert said.startswith("the llama.cpp server was killed by SIGILL (status -4); its log (")
    assert said.endswith("ends: llama_model_loader: loaded meta data | error: illegal "
                         "instruction ahead")


def test_a_server_that_exits_reports_its_status_and_log(tmp_path: Path) -> None:
    script = "import sys; print('error: no such model file', file=sys.stderr); sys.exit(3)"
    server = ServerProcess([sys.executable, "-c", script], tmp_path / "server.log", "server")
    try:
        said = failure(lambda: server.wait_until_up(f"http://127.0.0.1:{free_port()}/v1/models"))
    finally:
        server.stop()
    assert "\n" not in said
    assert said.startswith("the server exited with status 3; its log (")
    assert said.endswith("ends: error: no such model file")


def test_a_server_that_dies_at_its_first_completion_fails_in_one_line(tmp_path: Path) -> None:
    port = free_port()
    server = ServerProcess([sys.executable, "-c", DIES_AT_FIRST_COMPLETION, str(port)],
                           tmp_path / "server.log", "llama.cpp server")
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        server.wait_until_up(f"{base_url}/models", timeout=60)
        server.check()  # up and alive: nothing to say
        said = failure(lambda: server.first_completion(base_url, "m", timeout=60))
        # And every test after it, through the fixture's check: the same line.
        assert failure(server.check) == said
    finally:
        server.stop()
    assert "\n" not in said
    assert "Connection" not in said and "Remote end" not in said
    assert said.startswith("the llama.cpp server was killed by SIGILL (status -4)")
    assert said.endswith("ends: load_tensors: AMX model buffer size = 95.34 MiB | "
                         "ggml_backend_amx_mul_mat: running")
