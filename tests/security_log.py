"""The charm's security events as a test reads them: from the captured log, or as Loki got them.

:class:`LokiStandin` is Loki's push endpoint (``POST /loki/api/v1/push``) on 127.0.0.1: it
answers as Loki does (204, no body) and keeps every line with its stream labels.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from vocabulary.security_events import LOGGER_NAME

PUSH_PATH = "/loki/api/v1/push"


def security_events(caplog: pytest.LogCaptureFixture, name: str = "") -> list[dict[str, Any]]:
    """Every security event logged in the test's call phase, parsed; only ``name`` if given."""
    events = [json.loads(r.getMessage()) for r in caplog.records if r.name == LOGGER_NAME]
    return [e for e in events if not name or e["event"].startswith(f"{name}:")]


@dataclass(frozen=True)
class PushedLine:
    """One line Loki received, with the labels of its stream."""

    labels: dict[str, str]
    line: str


class LokiStandin:
    """Loki's push API on 127.0.0.1, recording what it receives."""

    def __init__(self, status: int = 204) -> None:
        """Answer every push with ``status`` (Loki's is 204)."""
        self.status = status
        self.lines: list[PushedLine] = []
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path == PUSH_PATH:
                    for stream in json.loads(body)["streams"]:
                        for _time, line in stream["values"]:
                            standin.lines.append(PushedLine(dict(stream["stream"]), line))
                self.send_response(standin.status if self.path == PUSH_PATH else 404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                del format, args

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The push URL a Loki unit publishes."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{PUSH_PATH}"

    def start(self) -> None:
        """Serve in a thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()

    def events(self) -> list[dict[str, Any]]:
        """The pushed lines, parsed."""
        return [json.loads(p.line) for p in self.lines]
