"""The Juju adapter of the desired state: relation data and secrets read once per pass.

Owns ``CharmState.from_charm``, which builds what one pass wants (a ``DesiredState``) from the
garm-configurator relations as the unit's record holds them (``configurator_record``), the
debug-ssh relation and the configurator secrets (through
``configurator_secrets``, which reads each only when its content is needed; with the garm-agent
binaries the caller read from the image, the shell kept off without a TLS ingress, and the
tmate relay given to the scale sets with a runner proxy when ``use-runner-proxy-for-tmate`` is
on), and the short status text of its input problems. The parsing itself lives in
``configurator_parser`` and ``debug_ssh``, the objects in ``desired_state``. Knows Juju; must
not import the GARM client or a reconciler.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from urllib.parse import urlsplit

import ops

from records.configurator_record import ConfiguratorView
from records.configurator_secrets import ConfiguratorSecrets
from relations import ingress
from relations.configurator_contract import unpublished_relation_ids
from relations.configurator_parser import parse_configurator_units
from relations.debug_ssh import DEBUG_SSH_RELATION_NAME, parse_debug_ssh
from vocabulary.desired_state import (
    AgentTools,
    DesiredState,
    Incumbents,
    InputProblem,
    ScalesetSpec,
    UnitData,
)
from vocabulary.notices import Notice, Severity
from vocabulary.tmate_relay import DebugSshConnection, RelayRefused, TmateRelay

logger = logging.getLogger(__name__)

# A shell is asked of GARM only when runners reach it over TLS (``withhold_shell``).
TLS_SCHEME = "https"
SHELL_NEEDS_TLS = "the shell needs a TLS ingress (https)"
# The charm option that gives scale sets with a runner proxy a tmate relay through it.
USE_RUNNER_PROXY_FOR_TMATE = "use-runner-proxy-for-tmate"


@dataclasses.dataclass(frozen=True)
class CharmState(DesiredState):
    """The desired state as read from Juju: ``DesiredState`` with its Juju reader.

    Attributes:
        shell_withheld: scale sets that ask for a shell GARM is not asked for, because GARM's
            external URL is not https.
    """

    shell_withheld: tuple[str, ...] = ()

    @classmethod
    def from_charm(
        cls,
        charm: ops.CharmBase,
        configurators: ConfiguratorView,
        incumbents: Incumbents | None = None,
        tools: AgentTools | None = None,
        *,
        read_secrets: bool = True,
        secrets: ConfiguratorSecrets | None = None,
    ) -> CharmState:
        """Parse the configurators, read the debug-ssh and ingress relations, once a pass.

        Args:
            charm: the charm whose model is read.
            configurators: the configurator relations, as the unit's record holds them.
            incumbents: who holds which name in GARM (as the last pass saw it).
            tools: the garm-agent binaries the image ships, as read from its manifest.
            read_secrets: False reads no configurator secret, for a reader of names and scale
                sets only (``configurator_parser.parse_configurator_units``).
            secrets: the pass's reader of configurator secrets, with its ledger; by default
                every secret named is read.

        Returns:
            The parsed state (a ``DesiredState``).
        """
        units = configurators.units
        relation_ids = configurators.relation_ids
        secrets = secrets or ConfiguratorSecrets(charm.model, digest_key="")
        reader, read_key = (secrets.password, secrets.app_key) if read_secrets else (None, None)
        parsed = parse_configurator_units(units, reader, incumbents, read_key)
        debug_relations = sorted(
            charm.model.relations[DEBUG_SSH_RELATION_NAME], key=lambda r: r.id
        )
        debug = parse_debug_ssh(_relation_units(debug_relations))
        unpublished = unpublished_relation_ids(relation_ids, units)
        external_url = ingress.external_base_url(charm)
        scalesets, withheld = withhold_shell(parsed.scalesets, external_url)
        scalesets, relay_problems = _relayed(charm, scalesets, debug.connections)
        return cls(
            providers=parsed.providers,
            credentials=parsed.credentials,
            endpoints=parsed.endpoints,
            entities=parsed.entities,
            scalesets=scalesets,
            debug_ssh=debug.connections,
            configurator_relation_count=len(relation_ids),
            unpublished_relation_ids=unpublished,
            unpublished_apps=tuple(configurators.apps[rid] for rid in unpublished),
            problems=parsed.problems + debug.problems + relay_problems,
            held=parsed.held,
            prune=not parsed.identity_unknown and not unpublished,
            agent_tools=tools or AgentTools(),
            external_url=external_url,
            shell_withheld=withheld,
        )

    @property
    def notices(self) -> tuple[Notice, ...]:
        """What the Juju side holds back this pass, for the status beside the chain's notices."""
        # Only the operator can give GARM a TLS ingress; the scale sets run on without a shell.
        withheld = self.shell_withheld
        return tuple(Notice(Severity.BLOCKED, name, SHELL_NEEDS_TLS) for name in withheld)


def withhold_shell(
    scalesets: Sequence[ScalesetSpec], base_url: str
) -> tuple[tuple[ScalesetSpec, ...], tuple[str, ...]]:
    """Keep the shell off where GARM's external URL is not https.

    Runners' agents reach GARM at the controller's agent URL, under ``base_url``; over plain
    HTTP the shell's keystrokes and output and the agent's token would cross the network in
    clear text, and the pinned garm-agent does not refuse that itself.

    Returns:
        The scale sets as GARM should get them, and the names of those whose shell is withheld.
    """
    if urlsplit(base_url).scheme == TLS_SCHEME:
        return tuple(scalesets), ()
    withheld = tuple(sorted({s.name for s in scalesets if s.enable_shell}))
    if withheld:
        logger.warning(
            "not enabling the shell of %s: GARM's external URL is not https (no TLS ingress)",
            ", ".join(withheld),
        )
    return tuple(dataclasses.replace(s, enable_shell=False) for s in scalesets), withheld


def _relayed(
    charm: ops.CharmBase,
    scalesets: tuple[ScalesetSpec, ...],
    connections: Sequence[DebugSshConnection],
) -> tuple[tuple[ScalesetSpec, ...], tuple[InputProblem, ...]]:
    """The scale sets with their tmate relays, when the option asks for them.

    The option is read (a ``config-get``) only where a relay could be given: a tmate server is
    related and some scale set has a runner proxy.
    """
    if not connections or not any(s.runner_config.runner_http_proxy for s in scalesets):
        return scalesets, ()
    if not charm.config.get(USE_RUNNER_PROXY_FOR_TMATE):
        return scalesets, ()
    return with_tmate_relays(scalesets, connections[0])


def with_tmate_relays(
    scalesets: Sequence[ScalesetSpec], server: DebugSshConnection
) -> tuple[tuple[ScalesetSpec, ...], tuple[InputProblem, ...]]:
    """Give each scale set with a runner proxy a tmate relay to ``server`` through it.

    A scale set without a proxy keeps the server's own address (nothing would listen on its
    runners' relay port). A proxy value, or a server host, the relay cannot be built from is a
    problem naming the configurator (or the tmate unit) and the key, never the value: that scale
    set gets no relay and keeps the server's own address.

    Returns:
        The scale sets, and the problems (one per source and reason).
    """
    relayed: list[ScalesetSpec] = []
    problems: dict[tuple[str, str], InputProblem] = {}
    for spec in scalesets:
        proxy = spec.runner_config.runner_http_proxy
        if not proxy:
            relayed.append(spec)
            continue
        try:
            relay = TmateRelay.through(proxy, server)
        except RelayRefused as refused:
            source = (server.unit_name or "debug-ssh") if refused.server_side else spec.source
            problems.setdefault((source, refused.reason), InputProblem(source, refused.reason))
            relayed.append(spec)
            continue
        relayed.append(dataclasses.replace(spec, tmate_relay=relay))
    for problem in problems.values():
        logger.warning(
            "no tmate relay (%s, from %s): runners are told the tmate server's own address",
            problem.reason,
            problem.source,
        )
    return tuple(relayed), tuple(problems.values())


def describe_problems(problems: Sequence[InputProblem]) -> str:
    """Summarise input problems in a short status fragment.

    Args:
        problems: the problems of this pass.

    Returns:
        ``invalid data from <source> (<reason>)``, followed by ``; +N more`` when there are
        others; an empty string when there are none.
    """
    if not problems:
        return ""
    # A configurator refused for a conflict comes first: only its operator can settle it; a
    # configurator that is only waiting for its image comes last: nothing is wrong there.
    first = min(problems, key=lambda p: (not p.blocked, p.waiting))
    if first.blocked:
        text = f"{first.source}: {first.reason}"
    elif first.waiting:
        text = first.reason
    else:
        text = f"invalid data from {first.source} ({first.reason})"
    if len(problems) > 1:
        text += f"; +{len(problems) - 1} more"
    return text


def _relation_units(relations: Sequence[ops.Relation]) -> list[UnitData]:
    """Detach the remote unit databags, in relation id then unit name order."""
    units: list[UnitData] = []
    for relation in relations:
        for unit in sorted(relation.units, key=lambda u: u.name):
            units.append(UnitData(relation.id, unit.name, dict(relation.data[unit])))
    return units
