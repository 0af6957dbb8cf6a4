"""Ports of 127.0.0.1 for servers the tests start as other processes (GARM, PostgreSQL).

Such a server must be told its port, so the port is picked before it exists. A port picked by
binding port 0 and closing the socket is free again at once: until the server binds it, the
kernel may hand it to anything else on the machine that binds port 0 (another test worker's
stand-in, proxy or emulator, another checkout's tests). The server then fails to start with
"address already in use", and whatever took the port answers the test in its place.

:func:`reserved_port` closes that window: it keeps the port bound, without listening, until the
block ends. The kernel hands a bound port to no other ``bind`` to port 0 and to no outgoing
connection, while a server that sets ``SO_REUSEADDR`` (Go's ``net.Listen`` and PostgreSQL both
do, and so does the reserving socket) may still bind it and listen: a socket that only binds
does not conflict with it. Nothing listens on the reserved port until the server does, so a
connection to it is refused, never answered by someone else.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def reserved_port(port: int = 0) -> Iterator[int]:
    """Hold a free port of 127.0.0.1 for the block; a server with ``SO_REUSEADDR`` may bind it.

    Close the block once the server listens (it holds the port from then on), or when the port
    is only wanted as one that nobody answers on. ``port`` holds that one (a server's own port
    while it restarts) instead of one the kernel picks.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", port))
        yield holder.getsockname()[1]
