"""`from ddm.client import Client`: the public door to a running pipeline (see ddm.router.client)."""

from ddm.router.client import (
    Client,
    JobFailedError,
    JobNotFoundError,
    JobTimeoutError,
    check_against_deployment,
)

__all__ = ["Client", "JobFailedError", "JobNotFoundError", "JobTimeoutError", "check_against_deployment"]
