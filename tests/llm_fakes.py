"""A fake OpenAI-compatible server on loopback, for what a real model cannot do on demand.

Rate limits, timeouts, server errors and malformed replies are scripted with
``Action``s; everything else is answered by ``respond(body)``. The server
records every request and the most requests it had in flight at once.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FACTUAL_REPLY = '{"label": "Factual", "supporting_passages": [1], "contradicting_passages": [], ' \
    '"reason": "passage 1 says so"}'


@dataclass
class Action:
    """One scripted answer to a chat request."""

    status: int = 200
    #: The assistant message's content (a normal completion is built around it).
    content: str | None = FACTUAL_REPLY
    #: Sent as the body instead of a completion, when set.
    raw: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    #: Seconds to wait before answering (longer than the client's timeout: a timeout).
    delay: float = 0.0
    error: str = "scripted error"


Responder = Callable[[dict[str, Any]], "Action | str"]


class FakeOpenAI:
    """``GET /v1/models`` and ``POST /v1/chat/completions`` on 127.0.0.1, in a thread."""

    def __init__(self, models: tuple[str, ...] = ("fake-model",)) -> None:
        self.models: list[str] | None = list(models)
        self.script: list[Action] = []
        self.respond: Responder = lambda body: FACTUAL_REPLY
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.model_requests = 0
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @property
    def chat_calls(self) -> int:
        with self.lock:
            return len(self.requests)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def next_action(self, body: dict[str, Any]) -> Action:
        with self.lock:
            scripted = self.script.pop(0) if self.script else None
        if scripted is not None:
            return scripted
        answer = self.respond(body)
        return answer if isinstance(answer, Action) else Action(content=answer)


def completion(content: str | None, model: str = "fake-model") -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def _handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # keep test output clean

        def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test)

        def do_GET(self) -> None:  # noqa: N802
            with fake.lock:
                fake.model_requests += 1
            if self.path.rstrip("/") != "/v1/models" or fake.models is None:
                self._send(404, b'{"error": {"message": "not found"}}')
                return
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "me"}
                    for m in fake.models]
            self._send(200, json.dumps({"object": "list", "data": data}).encode())

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(404, b'{"error": {"message": "not found"}}')
                return
            with fake.lock:
                fake.requests.append(body)
                fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                fake.in_flight += 1
                fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
            try:
                action = fake.next_action(body)
                if action.delay:
                    time.sleep(action.delay)
                if action.raw is not None:
                    self._send(action.status, action.raw, action.headers)
                elif action.status != 200:
                    error = {"error": {"message": action.error, "type": "fake", "code": None}}
                    self._send(action.status, json.dumps(error).encode(), action.headers)
                else:
                    payload = completion(action.content, body.get("model", "fake-model"))
                    self._send(200, json.dumps(payload).encode(), action.headers)
            finally:
                with fake.lock:
                    fake.in_flight -= 1

    return Handler


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
