"""`from ddm.client import Client`: the public door to a running pipeline (see ddm.router.client)."""

from ddm.router.client import (
    Client,
    JobFailedError,
    JobNotFoundError,
    JobTimeoutError,
    NoDeploymentError,
)
from ddm.schema.jobs import JobHash

__all__ = ["Client", "JobFailedError", "JobHash", "JobNotFoundError", "JobTimeoutError", "NoDeploymentError"]
