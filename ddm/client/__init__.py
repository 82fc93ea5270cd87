"""`from ddm.client import Client, JobSpec`: the public door to a running pipeline (see ddm.client.client).

    from ddm.client import Client, png_bytes

    with Client() as c:
        x = c.generate([3, 8], n=2)            # float32 [4, C, H, W], the deployment's defaults
        open("digits.png", "wb").write(png_bytes(x, cols=2))

HttpClient is the same jobs over the web UI's HTTP API, with an API key (ddm/client/http.py).

Everything here installs with the base package (no torch, JAX or Flask); pillow makes the pictures.
"""

from ddm.client import errors
from ddm.client.aio import AsyncClient
from ddm.client.client import Client
from ddm.client.errors import *  # noqa: F403 - its __all__: every error and warning a client may see
from ddm.client.http import HttpClient
from ddm.client.images import pil_images, png_bytes
from ddm.schema.errors import DDMError, ServiceUnavailableError
from ddm.schema.jobs import JobHash
from ddm.schema.messages import Frame, JobSpec, JobStatus
from ddm.schema.queue import QueuePosition

__all__ = [
    "AsyncClient",
    "Client",
    "DDMError",
    "Frame",
    "HttpClient",
    "JobHash",
    "JobSpec",
    "JobStatus",
    "QueuePosition",
    "ServiceUnavailableError",
    "pil_images",
    "png_bytes",
    *errors.__all__,
]
