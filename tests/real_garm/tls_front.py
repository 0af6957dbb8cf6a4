"""A TLS front on 127.0.0.1 for real GARM: ``https``/``wss`` to the runners, plain behind.

The harness runs GARM on plain HTTP, and the recording proxy relays no websocket upgrade. A
garm-agent offers a shell only over a secure agent URL, so a test that wants one points GARM's
agent URL at this front: it ends TLS with a certificate for ``127.0.0.1`` and relays the bytes
both ways to GARM's port, as a TLS-terminating load balancer in front of GARM would. The
certificate is signed by a CA made for the front; the simulated runners trust it through the
provider stand-in's trust store (:func:`tests.real_garm.provider_standin.set_trusted_ca`).

It runs on an asyncio loop in one thread of the test process and is stopped with
:meth:`TlsFront.stop`. The upstream port is asked for on every connection, so a GARM started
again on another port is still reached.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import ssl
import threading
from collections.abc import Callable
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

LOOPBACK = "127.0.0.1"
CHUNK = 65536
START_TIMEOUT = 10.0


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_certificates(directory: Path) -> tuple[Path, Path, Path]:
    """Write a CA and a server certificate for ``127.0.0.1`` signed by it.

    Returns the paths of the CA certificate, the server certificate and the server key (PEM).
    """
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("garm test front CA")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(_name(LOOPBACK))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(LOOPBACK))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_path, cert_path, key_path = (
        directory / "front-ca.pem",
        directory / "front.pem",
        directory / "front.key",
    )
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_path.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    return ca_path, cert_path, key_path


class TlsFront:
    """TLS on a free port of 127.0.0.1, relayed to ``upstream_port()`` on 127.0.0.1.

    Args:
        directory: where the certificates are written.
        upstream_port: GARM's current port, asked for on every connection.
    """

    def __init__(self, directory: Path, upstream_port: Callable[[], int]) -> None:
        self.ca_file, cert, key = make_certificates(directory)
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.load_cert_chain(cert, key)
        self._upstream_port = upstream_port
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        # Every stream the front opened or accepted, aborted when it stops: a closed TLS stream
        # keeps its socket until the peer's close_notify, which may never come.
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    @property
    def base_url(self) -> str:
        """``https://127.0.0.1:<port>``."""
        return f"https://{LOOPBACK}:{self.port}"

    def start(self) -> TlsFront:
        """Listen and serve in a thread of its own."""
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(self._loop)
            # TLS is started in each connection's task (``_relay``): a connection still in its
            # handshake when the front stops (a client that refuses the certificate and keeps
            # retrying) is then a task that ``_shutdown`` cancels, and its socket is closed;
            # with ``ssl=`` on the server it had no task and its socket leaked.
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._relay, LOOPBACK, 0)
            )
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, name="garm-tls-front", daemon=True)
        self._thread.start()
        if not ready.wait(START_TIMEOUT):
            raise RuntimeError("the TLS front did not start")
        return self

    def stop(self) -> None:
        """Close the listener and every relayed connection; end the thread."""
        if self._thread is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
        with contextlib.suppress(TimeoutError):
            future.result(timeout=START_TIMEOUT)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=START_TIMEOUT)
        self._thread = None
        self._loop.close()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        # Every stream first, finished connections' too (the loop stops right after this, and
        # a socket it has not closed leaks), then the connections' tasks; then let the loop run
        # the callbacks that close the sockets.
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()
        current = asyncio.current_task()
        tasks = [task for task in asyncio.all_tasks() if task is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.sleep(0)
        await asyncio.sleep(0)

    async def _relay(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter):
        self._writers.add(client_out)
        await self._relay_tls(client_in, client_out)

    async def _relay_tls(
        self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter
    ) -> None:
        try:
            await client_out.start_tls(self._context)
        except (OSError, ssl.SSLError):
            client_out.transport.abort()  # a refused handshake: nothing to say to the peer
            return
        try:
            garm_in, garm_out = await asyncio.open_connection(LOOPBACK, self._upstream_port())
        except OSError:
            client_out.close()
            return
        self._writers.add(garm_out)
        await asyncio.gather(
            _pump(client_in, garm_out), _pump(garm_in, client_out), return_exceptions=True
        )


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(CHUNK):
            sink.write(data)
            await sink.drain()
    except (OSError, ssl.SSLError):
        pass
    finally:
        sink.close()
