"""A stand-in for GARM under the real Pebble: it serves ``/metrics`` as GARM does, or exits.

``python3 standin_garm.py PORT MARK [--exit-after SECONDS] [--hang-at-start]``:
listens on 127.0.0.1:PORT and answers ``GET /metrics`` with 200 (what the charm's liveness
check asks), until killed; with ``--exit-after`` it exits with code 1 that many seconds after it
started; with ``--hang-at-start`` it stops itself (SIGSTOP) before it answers, as a GARM that
hangs at start. ``MARK`` only marks the process, so a test can find every stand-in of its own
in ``/proc``. Standard library only: Pebble runs it with the machine's Python.
"""

from __future__ import annotations

import argparse
import http.server
import os
import signal
import sys
import threading
import time


class _Metrics(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        status = 200 if self.path == "/metrics" else 404
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        del format, args


def main(argv: list[str]) -> int:
    """Serve until killed, or exit after the given time."""
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("mark")
    parser.add_argument("--exit-after", type=float, default=None)
    parser.add_argument("--hang-at-start", action="store_true")
    args = parser.parse_args(argv)
    if args.hang_at_start:
        os.kill(os.getpid(), signal.SIGSTOP)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), _Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    if args.exit_after is None:
        threading.Event().wait()
    time.sleep(args.exit_after)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
