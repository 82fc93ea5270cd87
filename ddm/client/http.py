"""The job client over the web UI's HTTP API, for users who hold an API key but may not reach RabbitMQ
and Redis (issue 39: the UI's `/api/jobs`, with `Authorization: Bearer KEY`).

    from ddm.client import HttpClient

    c = HttpClient("https://ddm.example.org", api_key="5f0c2a91d3e4b786.Xq...")   # `ddm keys create`
    x = c.generate([3, 8], n=2, steps=20, timeout=120)    # float32 [4, C, H, W], as Client.generate
    job = c.submit(JobSpec.new([7] * 4, steps=50))        # any labels, in any order
    print(c.status(job)["status"], c.me()["quota"])       # the job as the UI shows it; the key's quota
    x = c.result(job, timeout=60)

It is a second class, not Client with a key, because it reaches less: a job's status, result, cancel and
the recent jobs its key may see, and nothing of the broker (no frames: watch those on the page or
the OpenAI stream), and a spec may not name a webhook (`notify`) or an initial noise over HTTP. A result
is the stored float32 array, read from `.npy` with allow_pickle=False.
Refusals: AccessRefusedError (401, 403, 429), SchemaError (400), JobNotFoundError (404, which is also
what another user's job answers), ServiceUnavailableError (503); a job that ends without images,
JobFailedError or JobCancelledError.
"""

from __future__ import annotations

import io
import json
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

import numpy as np

from ddm.client.errors import (
    AccessRefusedError,
    JobCancelledError,
    JobFailedError,
    JobNotFoundError,
    JobTimeoutError,
)
from ddm.client.generation import generation_spec
from ddm.schema.errors import SchemaError, ServiceUnavailableError, expected
from ddm.schema.messages import JobSpec, JobStatus
from ddm.schema.names import check_job_id

POLL_S = 0.25  # between status reads while waiting for a job (each is one small GET)


class HttpClient:
    def __init__(self, url: str, api_key: str | None = None, *, request_timeout_s: float = 30.0):
        """url: the web UI's base URL (`ddm up` serves http://127.0.0.1:8000); api_key: a key from
        `ddm keys create`, or DDM_UI_TOKEN; None where the UI needs neither."""
        if not url.startswith(("http://", "https://")):
            raise SchemaError(expected("the web UI's URL, http:// or https://", url))
        self.url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.request_timeout_s = request_timeout_s

    def me(self) -> dict[str, Any]:
        """Who the key is and its quota left (GET /api/me)."""
        return self._json("GET", "/api/me")

    def deployment(self) -> dict[str, Any] | None:
        """The serving deployment as the page reads it (GET /api/config); None while no router serves."""
        return self._json("GET", "/api/config")["deployment"]

    def submit(self, spec: JobSpec) -> str:
        """Queue `spec` through the UI (its checks, the key's quotas); its job id, a fresh one: the UI
        names the job, not spec.job_id."""
        if not isinstance(spec, JobSpec):
            raise SchemaError(expected("a JobSpec", type(spec).__name__))
        return self._json("POST", "/api/jobs", {"spec": spec.to_dict()})["job_id"]

    def status(self, job_id: str) -> dict[str, Any]:
        """The job as the UI's API shows it (GET /api/jobs/<id>): status, labels, steps, error, ..."""
        return self._json("GET", f"/api/jobs/{check_job_id(job_id)}")

    def jobs(self) -> list[dict[str, Any]]:
        """The recent jobs this key may see (an admin: all)."""
        return self._json("GET", "/api/jobs")["jobs"]

    def cancel(self, job_id: str) -> dict[str, Any]:
        return self._json("POST", f"/api/jobs/{check_job_id(job_id)}/cancel")

    def result(self, job_id: str, timeout: float | None = None) -> np.ndarray:
        """Wait for the job to end; its images, float32 [n, C, H, W]. JobTimeoutError past `timeout` s
        (None: wait as long as it takes); JobFailedError, JobCancelledError when it ends without them."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.status(job_id)
            status = JobStatus(job["status"])
            if status is JobStatus.DONE:
                return self._array(f"/api/jobs/{job_id}/result.npy")
            if status is JobStatus.FAILED:
                raise JobFailedError(job_id, job.get("error") or "")
            if status is JobStatus.CANCELLED:
                raise JobCancelledError(job_id, job.get("step") or 0, job["steps"], job.get("error"))
            if deadline is not None and time.monotonic() > deadline:
                raise JobTimeoutError(f"job {job_id} still {status.value} after {timeout} s")
            time.sleep(POLL_S)

    def generate(
        self,
        labels: int | Sequence[int | None] | None = None,
        n: int = 1,
        *,
        timeout: float | None = None,
        **options,
    ) -> np.ndarray:
        """Submit, wait and return the images, as Client.generate: labels repeated n times, options the
        job's (steps, seed, strategy, guidance, solver, grid, prompt, negative_prompt, ...)."""
        return self.result(self.submit(generation_spec(labels, n, **options)), timeout=timeout)

    # ------------------------------------------------------------ HTTP

    def _json(self, method: str, path: str, body: dict | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        return json.loads(self._call(method, path, data))

    def _array(self, path: str) -> np.ndarray:
        try:
            return np.load(io.BytesIO(self._call("GET", path)), allow_pickle=False)
        except (ValueError, EOFError) as exc:
            raise ServiceUnavailableError(f"the web UI's {path} is not a .npy array: {exc}") from None

    def _call(self, method: str, path: str, data: bytes | None = None) -> bytes:
        headers = {**self._headers, **({"Content-Type": "application/json"} if data is not None else {})}
        req = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with _OPENER.open(req, timeout=self.request_timeout_s) as resp:
                return resp.read()
        except urllib.error.HTTPError as exc:
            raise _refusal(exc, path) from None
        except OSError as exc:  # refused, reset, timed out, no such host
            raise ServiceUnavailableError(f"cannot reach the web UI at {self.url}: {exc}") from None


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is an error here: urllib would send the Authorization header (the key) on to whatever
    host the redirect names, and turn a POST into a GET."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


def _refusal(exc: urllib.error.HTTPError, path: str) -> Exception:
    """The UI's JSON refusal ({"kind", "error"}) as the client's exception."""
    try:
        body = json.loads(exc.read())
        kind, message = str(body.get("kind", "?")), str(body.get("error", ""))
    except (ValueError, AttributeError):  # not JSON, or not an object: not the UI's refusal
        kind, message = "?", f"HTTP {exc.code} from {path}"
    if exc.code in (401, 403, 429):
        retry = exc.headers.get("Retry-After", "")
        seconds = float(retry) if retry.isdigit() else None  # the UI sends seconds; a date is not waited on
        return AccessRefusedError(message, exc.code, kind, seconds)
    if exc.code == 404:
        return JobNotFoundError(message)
    if exc.code in (400, 409, 413, 415):
        return SchemaError(message)
    return ServiceUnavailableError(f"the web UI answered {exc.code} ({kind}): {message}")
