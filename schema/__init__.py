"""The contract between processes: flow convention, messages, strict codec, names, settings, errors.

Imports numpy and msgpack only. Re-exports the names most callers need.
"""

from .codec import packb, unpackb
from .errors import ConfigError, SchemaError
from .messages import Frame, JobSpec, JobStatus, VelocityReply, VelocityRequest
from .names import Names
from .settings import Settings
from .strategy import Strategy

__all__ = [
    "ConfigError",
    "Frame",
    "JobSpec",
    "JobStatus",
    "Names",
    "SchemaError",
    "Settings",
    "Strategy",
    "VelocityReply",
    "VelocityRequest",
    "packb",
    "unpackb",
]
