"""JSON shapes on the wire, with the field names GARM decodes.

Owns how records look to GARM: scale sets, sessions, statistics, job messages, agents
(``RunnerReference``), JIT configs, runner groups and the runner download list. Field names
follow GARM's ``params/github.go`` and the vendored go-github types.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from .model import Agent, Job, RunnerGroup, ScaleSet, Session
from .tokens import rfc3339

RUNNER_VERSION = "2.330.0"
# (os, architecture, archive suffix) of the runner builds GitHub lists.
_RUNNER_BUILDS = (
    ("osx", "x64", "tar.gz"),
    ("osx", "arm64", "tar.gz"),
    ("linux", "x64", "tar.gz"),
    ("linux", "arm", "tar.gz"),
    ("linux", "arm64", "tar.gz"),
    ("win", "x64", "zip"),
    ("win", "arm64", "zip"),
)


def statistics(counts: dict[str, int]) -> dict[str, int]:
    """Render scale set statistics (``RunnerScaleSetStatistic``)."""
    return {
        "totalAvailableJobs": counts["available"],
        "totalAcquiredJobs": counts["acquired"],
        "totalAssignedJobs": counts["assigned"],
        "totalRunningJobs": counts["running"],
        "totalRegisteredRunners": counts["registered"],
        "totalBusyRunners": counts["busy"],
        "totalIdleRunners": counts["idle"],
    }


def scale_set(
    record: ScaleSet, group: RunnerGroup, actions_url: str, counts: dict[str, int]
) -> dict[str, Any]:
    """Render a scale set (``RunnerScaleSet``) as the Actions service does."""
    own = f"{actions_url}_apis/runtime/runnerscalesets/{record.id}"
    return {
        "id": record.id,
        "name": record.name,
        "runnerGroupId": record.runner_group_id,
        "runnerGroupName": group.name,
        "labels": [{"id": 0, "name": name, "type": "System"} for name in record.labels],
        "RunnerSetting": dict(record.runner_setting),
        "createdOn": rfc3339(record.created_on),
        "runnerJitConfigUrl": f"{own}/generatejitconfig",
        "getAcquirableJobsUrl": f"{own}/acquirablejobs",
        "acquireJobsUrl": f"{own}/acquirejobs",
        "statistics": statistics(counts),
        "status": None,
        "enabled": record.enabled,
    }


def session(
    record: Session, scale_set_json: dict[str, Any], queue_url: str, counts: dict[str, int]
) -> dict[str, Any]:
    """Render a message session (``RunnerScaleSetSession``)."""
    return {
        "sessionId": record.id,
        "ownerName": record.owner,
        "runnerScaleSet": scale_set_json,
        "messageQueueUrl": queue_url,
        "messageQueueAccessToken": record.token,
        "statistics": statistics(counts),
    }


def job_message(job: Job, message_type: str, acquire_url: str) -> dict[str, Any]:
    """Render one job message (``ScaleSetJobMessage``) of the given type; ``jobId`` is a string."""
    body: dict[str, Any] = {
        "messageType": message_type,
        "jobId": str(job.id),
        "runnerRequestId": job.id,
        "repositoryName": job.repository,
        "ownerName": job.owner,
        "jobWorkflowRef": job.workflow_ref,
        "jobDisplayName": job.display_name,
        "workflowRunId": job.run_id,
        "eventName": "push",
        "requestLabels": list(job.labels),
        "queueTime": rfc3339(job.queued_at),
    }
    if message_type == "JobAvailable":
        body["acquireJobUrl"] = acquire_url
    if job.assigned_at:
        body["scaleSetAssignTime"] = rfc3339(job.assigned_at)
    if job.started_at:
        body["runnerAssignTime"] = rfc3339(job.started_at)
    if message_type in {"JobStarted", "JobCompleted"} and job.runner_name:
        body["runnerId"] = job.runner_id
        body["runnerName"] = job.runner_name
    if message_type == "JobCompleted":
        body["finishTime"] = rfc3339(job.finished_at)
        body["result"] = job.result
    return body


def acquirable_job(job: Job, acquire_url: str) -> dict[str, Any]:
    """Render an entry of the acquirable jobs list (``AcquirableJob``)."""
    return {
        "acquireJobUrl": acquire_url,
        "messageType": "JobAvailable",
        "runnerRequestId": job.id,
        "repositoryName": job.repository,
        "ownerName": job.owner,
        "jobWorkflowRef": job.workflow_ref,
        "eventName": "push",
        "requestLabels": list(job.labels),
    }


def agent(record: Agent, group: RunnerGroup) -> dict[str, Any]:
    """Render a runner (``RunnerReference``) as the agents API does."""
    return {
        "id": record.id,
        "name": record.name,
        "os": "Linux",
        "runnerScaleSetId": record.scale_set_id,
        "createdOn": rfc3339(record.created_on),
        "runnerGroupId": record.runner_group_id,
        "runnerGroupName": group.name,
        "version": RUNNER_VERSION,
        "enabled": True,
        "ephemeral": True,
        "status": record.status,
        "disableUpdate": False,
        "provisioningState": "Provisioned",
        "busy": record.busy,
        "labels": [{"name": name, "type": "System"} for name in record.labels],
    }


def listing(values: list[Any]) -> dict[str, Any]:
    """Render an Actions service list (``{"count", "value"}``)."""
    return {"count": len(values), "value": values}


def _b64_json(value: dict[str, Any]) -> str:
    return base64.b64encode(json.dumps(value).encode()).decode()


def runner_file(value: dict[str, Any]) -> bytes:
    """One file of a JIT config as the Actions service hands it out (see :func:`jit_config`)."""
    if any(not isinstance(v, str | dict) for v in value.values()):
        raise TypeError("the service writes every value of a runner file as a string")
    return json.dumps(value, indent=2).encode("utf-8")


def jit_config(record: Agent, agent_json: dict[str, Any], server_url: str) -> dict[str, Any]:
    """Render ``generatejitconfig``'s answer: the runner and a base64 map of config files.

    ``encodedJITConfig`` is base64 of a JSON object mapping each file name to base64 of the
    file's bytes; the runner writes those bytes as they are (actions/runner
    ``src/Runner.Listener/Runner.cs``, ``--jitconfig``). Every value in ``.runner`` and in
    ``.credentials``' ``data`` is a string, booleans in .NET's spelling (``"True"``):
    garm-agent reads ``agentId``, ``agentName``, ``ephemeral`` and ``serverUrl`` into Go
    strings (``service/runner/types.go``, ``GitHubRunnerConfig``; its test fixture
    ``{"agentId":"123",...,"ephemeral":"True",...}``) and fails on a number or a boolean.
    Indented, one key per line: GARM's Linux install script reads the agent ID with
    ``grep "agentId" .runner | tr -d -c 0-9`` (``github_linux_userdata.tmpl``), which only
    works on such a file. UTF-8 without a byte-order mark: Go's ``json.Unmarshal`` in
    garm-agent refuses one, and the agent runs against GitHub.
    """
    files = {
        ".runner": {
            "agentId": str(record.id),
            "agentName": record.name,
            "poolId": str(record.runner_group_id),
            "serverUrl": server_url,
            "workFolder": "_work",
            "ephemeral": "True",
        },
        ".credentials": {
            "scheme": "OAuth",
            "data": {
                "clientId": str(record.id),
                "authorizationUrl": f"{server_url.rstrip('/')}/_apis/oauth2/token",
                "requireFipsCryptography": "True",
            },
        },
        ".credentials_rsaparams": {"note": "github-standin: not a key"},
    }
    encoded = {name: base64.b64encode(runner_file(v)).decode() for name, v in files.items()}
    return {"runner": agent_json, "encodedJITConfig": _b64_json(encoded)}


def error(err_type: str, message: str) -> dict[str, Any]:
    """Render an Actions service error body."""
    return {"message": message, "typeName": err_type, "typeKey": err_type, "errorCode": 0}


def rest_error(message: str) -> dict[str, Any]:
    """Render a GitHub REST API error body."""
    return {"message": message, "documentation_url": "https://docs.github.com/rest"}


def runner_downloads(base_url: str) -> list[dict[str, Any]]:
    """Render the runner application download list (``RunnerApplicationDownload``)."""
    out = []
    for os_name, arch, suffix in _RUNNER_BUILDS:
        filename = f"actions-runner-{os_name}-{arch}-{RUNNER_VERSION}.{suffix}"
        out.append(
            {
                "os": os_name,
                "architecture": arch,
                "download_url": (
                    f"{base_url}/actions/runner/releases/download/v{RUNNER_VERSION}/{filename}"
                ),
                "filename": filename,
                "sha256_checksum": hashlib.sha256(filename.encode()).hexdigest(),
            }
        )
    return out


def rest_runner_groups(groups: list[RunnerGroup], base: str) -> dict[str, Any]:
    """Render the REST runner group list (go-github ``RunnerGroups``)."""
    return {
        "total_count": len(groups),
        "runner_groups": [
            {
                "id": g.id,
                "name": g.name,
                "visibility": "all",
                "default": g.is_default,
                "runners_url": f"{base}/runner-groups/{g.id}/runners",
                "inherited": False,
                "allows_public_repositories": True,
                "restricted_to_workflows": False,
                "selected_workflows": [],
                "workflow_restrictions_read_only": False,
            }
            for g in groups
        ],
    }


def actions_runner_group(group: RunnerGroup, size: int) -> dict[str, Any]:
    """Render a runner group as the Actions service lists it (``RunnerGroup``)."""
    return {"id": group.id, "name": group.name, "size": size, "isDefaultGroup": group.is_default}
