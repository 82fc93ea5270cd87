"""What the client raises about a job (each also a DDMError): the CLI maps them to exit code 1."""

from __future__ import annotations

from ddm.schema.errors import DDMError, ServiceUnavailableError

# what ddm.client exports of these (ddm/client/__init__.py): every error and warning a client may see
__all__ = [
    "AccessRefusedError",
    "DecoderUnavailableError",
    "DegradedResultWarning",
    "ExpertUnavailableError",
    "JobCancelledError",
    "JobDegradedError",
    "JobFailedError",
    "JobNotFoundError",
    "JobTimeoutError",
    "NoDeploymentError",
    "TextEncoderUnavailableError",
]


class JobNotFoundError(DDMError, LookupError):
    """No job hash under this id (never submitted with this prefix, or expired after job_ttl_s)."""


class JobFailedError(DDMError, RuntimeError):
    """The job ended with status failed; `error` is the router's reason."""

    def __init__(self, job_id: str, error: str):
        super().__init__(f"job {job_id} failed: {error or '(no error text stored)'}")
        self.job_id = job_id
        self.error = error


class JobCancelledError(DDMError, RuntimeError):
    """The job ended with status cancelled (Client.cancel, or its deadline passed: `reason`): it has no
    result; its frames are kept."""

    def __init__(self, job_id: str, step: int, steps: int, reason: str | None = None):
        super().__init__(
            f"job {job_id} was cancelled (at step {step}/{steps})" + (f": {reason}" if reason else "")
        )
        self.job_id = job_id
        self.reason = reason


class JobTimeoutError(DDMError, TimeoutError):
    """A wait on a job ran past its timeout."""


class NoDeploymentError(ServiceUnavailableError):
    """No router has published a deployment descriptor under this prefix (none is serving, or the last
    one stopped more than heartbeat_ttl_s ago)."""


class ExpertUnavailableError(ServiceUnavailableError):
    """A job needs an expert with no live worker: refused at submit unless queued anyway."""


class DecoderUnavailableError(ServiceUnavailableError):
    """A latent deployment's job while no decoder worker runs (its pixels are made there): refused at
    submit unless queued anyway."""


class TextEncoderUnavailableError(ServiceUnavailableError):
    """A text deployment's job while no text-encoder worker runs (its prompt becomes embeddings there):
    refused at submit unless queued anyway."""


class DegradedResultWarning(UserWarning):
    """A job's result was computed without some expert at some steps (it had no live worker and the job
    let mixing route around it): a different model than the one asked for, at those steps."""


class JobDegradedError(DDMError, RuntimeError):
    """Client.result(on_degraded="raise") of a degraded job; `images` holds the result all the same."""

    def __init__(self, job_id: str, degraded: dict[int, tuple[int, ...]], images=None):
        from ddm.schema.jobs import degraded_text

        super().__init__(f"job {job_id} was degraded: {degraded_text(degraded)}")
        self.job_id = job_id
        self.degraded = degraded
        self.images = images


class AccessRefusedError(DDMError):
    """The web UI refused the request (HttpClient): no, a wrong or a revoked key (status 401), a key's
    scope too small (403), or a quota or rate spent (429; `retry_after_s` says when to come back)."""

    def __init__(self, message: str, status: int, kind: str, retry_after_s: float | None = None):
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.retry_after_s = retry_after_s
