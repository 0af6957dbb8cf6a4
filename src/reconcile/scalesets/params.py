"""GARM request bodies for a scale set spec, and whether a live scale set needs one.

Owns how a spec becomes a create body and an update body (``extra_specs`` included; explicit
empty values where ``None`` would not clear a field) and the comparison that says a live scale
set differs from its spec, reading fields GARM omitted as zero. Pure: must not import ops;
makes no GARM call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from garm import CreateScaleSetParams, ScaleSet, UpdateScaleSetParams, to_base64
from vocabulary.desired_state import ScalesetSpec
from vocabulary.runner_options import RunnerConfig
from vocabulary.runner_template import (
    APROXY_SCRIPT_NAME,
    render_aproxy_pre_install_script,
    render_tmate_relay_script,
)
from vocabulary.tmate_relay import RELAY_SCRIPT_NAME, TmateRelay

# The runner group GARM records for a scale set created without one.
DEFAULT_RUNNER_GROUP = "Default"


def create_params(spec: ScalesetSpec, live_name: str) -> CreateScaleSetParams:
    """Build the create body; ``template_id`` is filled in once the template is ensured."""
    extra = effective_extra_specs(spec.pre_install_scripts, spec.runner_config, spec.tmate_relay)
    params = CreateScaleSetParams(
        name=live_name,
        provider_name=spec.provider_name,
        image=spec.image,
        flavor=spec.flavor,
        os_type=spec.os_type or "linux",
        os_arch=spec.os_arch,
        max_runners=spec.max_runners,
        min_idle_runners=spec.min_idle_runners,
        enabled=True,
        labels=sorted(spec.labels),
        extra_specs=extra or None,
        # Off is GARM's default: only a shell asked for is sent.
        enable_shell=spec.enable_shell or None,
    )
    # The field's wire name has dashes, so it is set by field name after construction.
    return params.model_copy(update={"github_runner_group": spec.runner_group or None})


def needs_update(
    observed: ScaleSet, spec: ScalesetSpec, desired_extra: Mapping[str, Any], template_id: int
) -> bool:
    """Tell whether a live scale set differs from its spec, reading omitted fields as zero."""
    observed_extra: Mapping[str, Any] = observed.extra_specs or {}
    return (
        (observed.image or "") != spec.image
        or (observed.flavor or "") != spec.flavor
        or (observed.max_runners or 0) != spec.max_runners
        or (observed.min_idle_runners or 0) != spec.min_idle_runners
        or observed.enabled is not True
        or _runner_group(observed.github_runner_group) != _runner_group(spec.runner_group)
        or observed_extra.get("pre_install_scripts", {})
        != desired_extra.get("pre_install_scripts", {})
        or bool(observed_extra.get("disable_updates"))
        != bool(desired_extra.get("disable_updates"))
        or _template_changes(observed, template_id)
        or bool(observed.enable_shell) != spec.enable_shell
    )


def _template_changes(observed: ScaleSet, template_id: int) -> bool:
    # 0 leaves the template to GARM, which picks its system template itself and refuses 0 as
    # an id: only a named template is ever compared or sent.
    return bool(template_id) and observed.template_id != template_id


def _runner_group(name: str | None) -> str:
    """Return the runner group GARM uses for ``name``: no group at all means GitHub's default."""
    return name or DEFAULT_RUNNER_GROUP


def update_params(
    observed: ScaleSet, spec: ScalesetSpec, desired_extra: dict[str, Any], template_id: int
) -> UpdateScaleSetParams:
    """Build the update body; explicit empty values clear what ``None`` cannot."""
    extra_specs: dict[str, Any] | None = desired_extra or ({} if observed.extra_specs else None)
    # GARM ignores an empty group on update, so going back to no group means naming "Default";
    # an unchanged group is not sent, which keeps GARM from asking GitHub about it again.
    wanted_group = _runner_group(spec.runner_group)
    group_changed = _runner_group(observed.github_runner_group) != wanted_group
    send_template = _template_changes(observed, template_id)
    return UpdateScaleSetParams(
        enabled=True,
        image=spec.image,
        flavor=spec.flavor,
        max_runners=spec.max_runners,
        min_idle_runners=spec.min_idle_runners,
        runner_group=wanted_group if group_changed else None,
        extra_specs=extra_specs,
        template_id=template_id if send_template else None,
        # GARM starts a new generation of runners on a change; an unchanged flag is not sent.
        enable_shell=spec.enable_shell
        if bool(observed.enable_shell) != spec.enable_shell
        else None,
    )


def effective_extra_specs(
    pre_install_scripts: Mapping[str, str],
    cfg: RunnerConfig,
    relay: TmateRelay | None = None,
) -> dict[str, object]:
    """Compute the ``extra_specs`` GARM gets for a scale set.

    With a runner proxy, the aproxy script is added first (GARM runs scripts in key order) and
    cloud-init updates are disabled, since they run before any pre-install script could set
    up the proxy. A tmate relay's script follows aproxy's.

    Args:
        pre_install_scripts: the configurator's scripts, name to content.
        cfg: the scale set's runner options.
        relay: the scale set's tmate relay, if it has one.

    Returns:
        ``{"pre_install_scripts": {name: base64}, "disable_updates": True}`` as applicable, or
        ``{}`` when there is nothing to send (which also clears earlier extra specs in GARM).
    """
    scripts: dict[str, str] = {}
    extra: dict[str, object] = {}
    if cfg.runner_http_proxy:
        scripts[APROXY_SCRIPT_NAME] = render_aproxy_pre_install_script(cfg)
        extra["disable_updates"] = True
    if relay is not None:
        scripts[RELAY_SCRIPT_NAME] = render_tmate_relay_script(relay)
    for name, content in pre_install_scripts.items():
        scripts.setdefault(name, content)
    if scripts:
        extra["pre_install_scripts"] = {
            name: to_base64(content) for name, content in scripts.items()
        }
    return extra
