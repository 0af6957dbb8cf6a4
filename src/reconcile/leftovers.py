"""What a replaced GARM database leaves in the cloud: the runner machines of its controller.

GARM finds a provider's servers by its own controller id (every runner machine carries the tag
``garm-controller-id``), so a GARM on another database never sees, and never deletes, the
machines the old one made; and the charm does not reach the cloud. What the charm can do is
name them. When GARM's controller id changes, the old id is logged once and remembered
(``replaced-controllers`` in the memory) with when it was replaced, and named in the status for
:data:`SHOWN_FOR`: Juju's status has no acknowledgement, and the machines cost until someone
deletes them (``docs/how-to/backup-and-restore.md``). Must not import ops.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta

from vocabulary.notices import Notice, Severity

logger = logging.getLogger(__name__)

# Long enough to outlast a weekend and a holiday of an operator who reads `juju status`.
SHOWN_FOR = timedelta(days=7)


def replaced_controllers(
    before: str, now_id: str, remembered: Mapping[str, datetime], now: datetime
) -> dict[str, datetime]:
    """The replaced controller ids to name after a pass, each with when it was replaced.

    Args:
        before: GARM's controller id as the last pass read it ("" when never read).
        now_id: GARM's controller id as this pass read it ("" when not read).
        remembered: the replaced ids named so far.
        now: the pass's time (timezone-aware).
    """
    kept = {cid: at for cid, at in remembered.items() if now - at <= SHOWN_FOR and cid != now_id}
    if before and now_id and now_id != before and before not in kept:
        logger.warning(
            "GARM's controller id changed from %s to %s: another database. The runner machines"
            " GARM made before are tagged garm-controller-id=%s in the cloud, and GARM no"
            " longer sees them: delete them there (docs/how-to/backup-and-restore.md)",
            before,
            now_id,
            before,
        )
        kept[before] = now
    return kept


def leftover_notices(replaced: Mapping[str, datetime]) -> list[Notice]:
    """One notice per replaced controller whose machines may remain in the cloud."""
    return [
        Notice(
            Severity.PROGRESS,
            "GARM",
            f"runner machines of its replaced database may remain: garm-controller-id={cid}",
        )
        for cid in sorted(replaced)
    ]
