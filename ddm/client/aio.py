"""AsyncClient: the Client for asyncio programs (an async web handler, a batch of jobs awaited together).

    async with AsyncClient() as c:
        ids = [await c.submit(JobSpec.new([k], steps=20)) for k in range(10)]
        images = await asyncio.gather(*(c.result(i, timeout=120) for i in ids))

It drives one blocking Client from threads, so the event loop never blocks on the broker or Redis:
everything that touches the broker (submit: its publish and its check of the expert queues) runs on one
thread of its own, in order, because a pika connection must stay on one thread; the Redis reads (status,
find, wait, result, frames, cancel) run on asyncio's default thread pool, many at once (redis-py's pool is
thread-safe). Errors are the Client's own (ddm.client.errors). frames() is an async iterator whose thread
stops at the next frame after the loop leaves it.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ddm.client.client import Client
from ddm.client.generation import generation_spec
from ddm.schema.jobs import JobHash
from ddm.schema.messages import Frame, JobSpec, JobStatus
from ddm.schema.queue import QueuePosition

_END = object()  # frames(): the blocking iterator has ended


class AsyncClient:
    """The Client's submit, status, queue_position, find, wait, result, frames and cancel as coroutines.
    Takes the Client's arguments (settings, amqp_url, redis_url, prefix), or an existing `client` to drive."""

    def __init__(self, *args, client: Client | None = None, **kwargs):
        self.client = client if client is not None else Client(*args, **kwargs)
        self._broker_thread = ThreadPoolExecutor(1, thread_name_prefix="ddm-aio-broker")

    async def _broker(self, fn, *args, **kwargs):
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._broker_thread, functools.partial(fn, *args, **kwargs))

    async def submit(self, spec: JobSpec, **kwargs) -> str:
        """Client.submit (check, queue_anyway, priority, deadline_s): validate, create the job hash, queue
        the job; returns its id."""
        return await self._broker(self.client.submit, spec, **kwargs)

    async def status(self, job_id: str) -> JobHash:
        return await asyncio.to_thread(self.client.status, job_id)

    async def queue_position(self, job_id: str) -> QueuePosition | None:
        return await asyncio.to_thread(self.client.queue_position, job_id)

    async def find(self, status: JobStatus | str | None = None, limit: int = 20) -> list[JobHash]:
        return await asyncio.to_thread(self.client.find, status, limit)

    async def wait(self, job_id: str, timeout: float | None = None) -> JobHash:
        """Client.wait: until the job has ended (done, failed or cancelled); its job hash."""
        return await asyncio.to_thread(self.client.wait, job_id, timeout)

    async def result(
        self, job_id: str, timeout: float | None = None, *, on_degraded: str = "warn", latent: bool = False
    ) -> np.ndarray:
        """Client.result: the images float32 [n, C, H, W] (a latent deployment's decoded, unless
        `latent`); raises as Client.result does."""
        return await asyncio.to_thread(
            self.client.result, job_id, timeout, on_degraded=on_degraded, latent=latent
        )

    async def generate(
        self,
        labels: int | Sequence[int | None] | None = None,
        n: int = 1,
        *,
        queue_anyway: bool = False,
        timeout: float | None = None,
        on_degraded: str = "warn",
        **options,
    ) -> np.ndarray:
        """Client.generate as a coroutine: submit, wait, the images float32 [len(labels) * n, C, H, W]."""
        spec = generation_spec(labels, n, **options)
        job_id = await self.submit(spec, queue_anyway=queue_anyway)
        return await self.result(job_id, timeout, on_degraded=on_degraded)

    async def cancel(self, job_id: str) -> JobHash:
        return await asyncio.to_thread(self.client.cancel, job_id)

    async def frames(self, job_id: str, timeout: float | None = None) -> AsyncIterator[Frame]:
        """Client.frames(follow=True): every stored frame, then the new ones as the router stores them."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        stop = False

        def pump() -> None:
            try:
                for frame in self.client.frames(job_id, timeout=timeout):
                    loop.call_soon_threadsafe(queue.put_nowait, frame)
                    if stop:
                        return
                loop.call_soon_threadsafe(queue.put_nowait, _END)
            except BaseException as exc:  # handed to the awaiting side, raised there
                loop.call_soon_threadsafe(queue.put_nowait, exc)

        task = loop.run_in_executor(None, pump)
        try:
            while (item := await queue.get()) is not _END:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop = True
            if task.done():
                task.exception()  # already handed over; retrieve it so asyncio does not log it again

    async def close(self) -> None:
        await self._broker(self.client.close)
        self._broker_thread.shutdown(wait=True)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
