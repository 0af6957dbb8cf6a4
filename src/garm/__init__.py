"""GARM's REST API as the charm uses it: the one door to GARM.

``client`` has one method per GARM call the charm makes, ``transport`` sends a request (one
trace span per call, failures mapped to :class:`GarmApiError` and its subclasses) and
``models`` holds the request and answer models, the errors and the base64 helpers. Callers
import everything GARM-facing from this package. Nothing here imports ops or a Juju-side module.
"""

from garm.client import (
    READY_INTERVAL,
    READY_TIMEOUT,
    GarmClient,
)
from garm.models import (
    ControllerInfo,
    CreateCredentialParams,
    CreateScaleSetParams,
    CreateTemplateParams,
    Credential,
    GarmApiError,
    GarmConflictError,
    GarmConnectionError,
    GarmNotFoundError,
    GarmProtocolError,
    GarmUnauthorizedError,
    GithubApp,
    Instance,
    Job,
    Organization,
    Provider,
    Repository,
    RequestModel,
    ResponseModel,
    ScaleSet,
    Tag,
    Template,
    UpdateCredentialParams,
    UpdateScaleSetParams,
    describe_failure,
    from_base64,
    to_base64,
)
from garm.transport import (
    GARM_API_URL,
    HTTP_TIMEOUT,
    TRACER_NAME,
    path_template,
)

__all__ = [
    "GARM_API_URL",
    "HTTP_TIMEOUT",
    "READY_INTERVAL",
    "READY_TIMEOUT",
    "TRACER_NAME",
    "ControllerInfo",
    "CreateCredentialParams",
    "CreateScaleSetParams",
    "CreateTemplateParams",
    "Credential",
    "GarmApiError",
    "GarmClient",
    "GarmConflictError",
    "GarmConnectionError",
    "GarmNotFoundError",
    "GarmProtocolError",
    "GarmUnauthorizedError",
    "GithubApp",
    "Instance",
    "Job",
    "Organization",
    "Provider",
    "Repository",
    "RequestModel",
    "ResponseModel",
    "ScaleSet",
    "Tag",
    "Template",
    "UpdateCredentialParams",
    "UpdateScaleSetParams",
    "describe_failure",
    "from_base64",
    "path_template",
    "to_base64",
]
