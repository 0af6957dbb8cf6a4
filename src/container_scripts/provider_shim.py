#!/usr/bin/python3
"""Provider shim: runs garm-provider-openstack with a pool ID Nova accepts in a server tag.

GARM runs this file as its external provider (``provider_executable``); it execs the real
provider, :data:`PROVIDER_NAME` in the shim's own directory, with the same environment, stdin,
stdout and stderr, so the provider's output and exit status reach GARM untouched.

Why: for a scale-set runner GARM (up to at least afda4e76) hands the provider the pool ID
``<scale set name>-<entity UUID>``; garm-provider-openstack tags every server
``garm-pool-id=<pool id>`` and lists a pool's servers by that tag, and Nova refuses a tag longer
than 60 characters or holding ``,`` or ``/``. So a pool ID whose tag Nova would refuse is
replaced by a UUID derived from it (:func:`nova_pool_id`): the same pool ID always gives the
same UUID, so ``CreateInstance`` tags a server with the value ``ListInstances`` later looks for.
The provider reads the pool ID twice, and both are replaced: ``GARM_POOL_ID`` in the
environment (``ListInstances``, ``CreateInstance``) and ``pool_id`` in the bootstrap parameters
on stdin (``CreateInstance`` builds the server's tag and metadata from that one). A pool ID
whose tag fits passes unchanged, and then stdin is not even read. The instances the provider
prints carry no pool ID, and GARM matches them by name and never reads one, so nothing is mapped
back.

The derivation must never change: servers started under one mapping are only found again under
the same one (docs/explanation/adr/0008-provider-shim-for-long-pool-ids.md).

Standard library only (it ships in the image next to the provider, run by the image's Python).
It writes nothing but a one-line error on stderr when it cannot run the provider, never a value
from the environment or stdin.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Callable, Mapping
from typing import BinaryIO, cast

# The real provider, next to the shim (in the image: /usr/local/bin).
PROVIDER_NAME = "garm-provider-openstack"
POOL_ID_VAR = "GARM_POOL_ID"
COMMAND_VAR = "GARM_COMMAND"
CREATE_COMMAND = "CreateInstance"
BOOTSTRAP_POOL_ID = "pool_id"
# garm-provider-openstack's tag name, and what Nova accepts in a server tag.
POOL_TAG_PREFIX = "garm-pool-id="
MAX_TAG_LENGTH = 60
TAG_FORBIDDEN = (",", "/")
# Fixed forever: changing it orphans every server started under the old mapping.
POOL_ID_NAMESPACE = uuid.UUID("6f1d2c3a-8b7e-5d4c-9a0b-1c2d3e4f5a6b")
EXIT_FAILED = 1

Execve = Callable[[str, list[str], Mapping[str, str]], object]


def tag_fits(pool_id: str) -> bool:
    """Tell whether Nova accepts ``garm-pool-id=<pool_id>`` as a server tag."""
    tag = POOL_TAG_PREFIX + pool_id
    return len(tag) <= MAX_TAG_LENGTH and not any(char in tag for char in TAG_FORBIDDEN)


def nova_pool_id(pool_id: str) -> str:
    """Return the pool ID the provider gets: unchanged when its tag fits, else a UUID of it."""
    if tag_fits(pool_id):
        return pool_id
    return str(uuid.uuid5(POOL_ID_NAMESPACE, pool_id))


def rewrite_bootstrap(data: bytes) -> bytes:
    """Replace ``pool_id`` in the bootstrap parameters; anything unreadable passes as it came.

    The provider decodes the parameters into a struct, so key order and spacing do not matter;
    only ``pool_id`` changes value.
    """
    try:
        decoded: object = json.loads(data)
    except ValueError:
        return data
    if not isinstance(decoded, dict):
        return data
    params = cast("dict[str, object]", decoded)
    pool_id = params.get(BOOTSTRAP_POOL_ID)
    if not isinstance(pool_id, str) or tag_fits(pool_id):
        return data
    params[BOOTSTRAP_POOL_ID] = nova_pool_id(pool_id)
    return json.dumps(params, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _replace_stdin(data: bytes) -> None:
    """Make ``data`` the process's stdin (fd 0), for the provider exec'd next.

    An anonymous memory file, not a pipe: the parameters can be larger than a pipe's buffer and
    nobody would be left to drain it.
    """
    fd = os.memfd_create("bootstrap-params")
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    os.dup2(fd, 0)
    os.close(fd)


def provider_path(shim_file: str = __file__) -> str:
    """Return the real provider's path: :data:`PROVIDER_NAME` beside the shim."""
    return os.path.join(os.path.dirname(os.path.abspath(shim_file)), PROVIDER_NAME)


def main(
    environ: Mapping[str, str] = os.environ,
    stdin: BinaryIO | None = None,
    execve: Execve = os.execve,
    replace_stdin: Callable[[bytes], None] = _replace_stdin,
) -> int:
    """Exec the real provider with a pool ID Nova accepts; return 1 only when it cannot run.

    Args:
        environ: the environment GARM gave the provider.
        stdin: the bootstrap parameters, read only for ``CreateInstance`` with a long pool ID
            (the process's stdin when None).
        execve: the exec function (tests only).
        replace_stdin: installs the rewritten parameters as stdin (tests only).
    """
    env = dict(environ)
    pool_id = env.get(POOL_ID_VAR, "")
    if pool_id and not tag_fits(pool_id):
        env[POOL_ID_VAR] = nova_pool_id(pool_id)
        if env.get(COMMAND_VAR) == CREATE_COMMAND:
            source = stdin if stdin is not None else sys.stdin.buffer
            replace_stdin(rewrite_bootstrap(source.read()))
    target = provider_path()
    try:
        execve(target, [target], env)
    except OSError as exc:
        sys.stderr.write(f"garm-provider-shim: cannot execute {target}: {exc.strerror}\n")
        return EXIT_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
