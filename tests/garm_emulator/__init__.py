"""An in-process GARM for tests: GARM's HTTP API and wire format on 127.0.0.1.

Use :class:`GarmEmulator` (``with GarmEmulator(providers=["cfg-a-0"]) as garm: ...``), point
the client at ``garm.url`` and drive GARM's background work with ``garm.advance()``.
"""

from .server import (
    API_PREFIX,
    DEFAULT_ADMIN_PASSWORD,
    GarmEmulator,
    RecordedRequest,
)
from .state import SYSTEM_TEMPLATE_BODY, SYSTEM_TEMPLATE_ID, SYSTEM_TEMPLATE_NAME, ApiError
from .wire import RESPONSE_STRUCTS, to_wire

__all__ = [
    "API_PREFIX",
    "DEFAULT_ADMIN_PASSWORD",
    "RESPONSE_STRUCTS",
    "SYSTEM_TEMPLATE_BODY",
    "SYSTEM_TEMPLATE_ID",
    "SYSTEM_TEMPLATE_NAME",
    "ApiError",
    "GarmEmulator",
    "RecordedRequest",
    "to_wire",
]
