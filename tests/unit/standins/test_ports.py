"""A reserved port is kept from everything but the server it is meant for."""

from __future__ import annotations

import socket

import pytest

from tests.real_garm.ports import reserved_port


def _bound(port: int, *, reuse: bool) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if reuse:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    return sock


def test_nobody_answers_on_a_reserved_port():
    with reserved_port() as port, pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_a_server_without_reuse_cannot_take_a_reserved_port():
    with reserved_port() as port, pytest.raises(OSError, match="in use"):
        _bound(port, reuse=False).close()


def test_the_server_it_is_for_listens_on_it_and_keeps_it_after_the_block():
    # GARM (Go's net.Listen) and PostgreSQL bind with SO_REUSEADDR, as this server does.
    with reserved_port() as port:
        server = _bound(port, reuse=True)
        server.listen()
    with server, socket.create_connection(("127.0.0.1", port), timeout=5):
        accepted, _ = server.accept()
        accepted.close()
        with pytest.raises(OSError, match="in use"):
            _bound(port, reuse=True).listen()
