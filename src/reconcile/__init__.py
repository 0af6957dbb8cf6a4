"""Everything that writes to GARM, and the face the charm calls it through.

What the charm may call, all here: :func:`admin_session` (the one way into GARM as its admin),
:func:`run_chain` (one pass: controller URLs, credentials, agent tools, entities, charmed
template, scale sets, then deletions in reverse) with its :class:`Writes` (the bounded pool and
the pass's budget), the memory kept between hooks (:class:`Memory` and its field encoding;
:class:`IdleStarts`, which the unit keeps), the ``scaleset-status`` table, and the removal
teardown (:func:`remove_managed`). The modules behind it each own one kind of object
(``credentials``, ``entities``, ``charmed_template``, ``controller``, ``scalesets/``) or one
rule (``containment``, ``session``, ``memory``). Nothing here imports ops or a Juju-side
module: the charm hands in a ``DesiredState`` and takes back a ``ChainResult``.
"""

from reconcile.chain import ChainResult, run_chain
from reconcile.charmed_template import CharmedTemplateError
from reconcile.memory import Memory
from reconcile.memory import decode as decode_memory
from reconcile.memory import encode as encode_memory
from reconcile.scalesets.table import format_runner_faults, format_scaleset_table, read_status
from reconcile.scalesets.worker_starts import IdleStarts
from reconcile.session import (
    AdminRefusedError,
    GarmNotAnsweringError,
    GarmNotInitialisedError,
    admin_session,
)
from reconcile.teardown import POLL_INTERVAL, TEARDOWN_TIMEOUT, TeardownError, remove_managed
from reconcile.writes import PASS_BUDGET, Unfinished, Writes

__all__ = [
    "PASS_BUDGET",
    "POLL_INTERVAL",
    "TEARDOWN_TIMEOUT",
    "AdminRefusedError",
    "ChainResult",
    "CharmedTemplateError",
    "GarmNotAnsweringError",
    "GarmNotInitialisedError",
    "IdleStarts",
    "Memory",
    "TeardownError",
    "Unfinished",
    "Writes",
    "admin_session",
    "decode_memory",
    "encode_memory",
    "format_runner_faults",
    "format_scaleset_table",
    "read_status",
    "remove_managed",
    "run_chain",
]
