"""AsyncClient on the real pipeline: jobs submitted and awaited together, the event loop free while they
run (a ticker keeps ticking), frames as an async iterator, and the client's errors raised in the caller."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from ddm.client import JobNotFoundError
from ddm.client.aio import AsyncClient
from ddm.schema.messages import JobSpec
from tests.support.harness import Pipeline

STEPS = 20


@pytest.fixture(scope="module")
def pipeline(shared_labels_deployment, tmp_path_factory):
    with Pipeline(shared_labels_deployment, tmp_path_factory.mktemp("logs")) as pipe:
        yield pipe.up({"a": 0, "b": 1})


async def ticker(ticks: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        ticks.append(asyncio.get_running_loop().time())
        await asyncio.sleep(0.01)


def test_jobs_awaited_together_leave_the_loop_free(pipeline):
    async def scenario():
        ticks: list[float] = []
        stop = asyncio.Event()
        tick = asyncio.create_task(ticker(ticks, stop))
        async with AsyncClient(settings=pipeline.settings) as c:
            ids = await asyncio.gather(*(c.submit(JobSpec.new([k], steps=STEPS, seed=k)) for k in (1, 5, 8)))
            t0 = asyncio.get_running_loop().time()
            results = await asyncio.gather(*(c.result(i, timeout=120) for i in ids))
            waited = asyncio.get_running_loop().time() - t0
            steps = [f.step async for f in c.frames(ids[0], timeout=30)]
            with pytest.raises(JobNotFoundError):
                await c.status("no-such-job")
            found = {j.job_id for j in await c.find("done", limit=10)}
        stop.set()
        await tick
        return ids, results, waited, ticks, steps, found

    ids, results, waited, ticks, steps, found = asyncio.run(scenario())
    assert len(set(ids)) == 3 and set(ids) <= found
    assert all(r.shape[0] == 1 and r.dtype == np.float32 for r in results)
    assert steps == list(range(1, STEPS + 1))
    # the loop ran while the three results were awaited: about one tick per 10 ms, not one in all
    print(f"results awaited {waited:.2f} s, {len(ticks)} ticks")
    assert waited > 0.1 and len(ticks) >= waited / 0.01 / 4, (len(ticks), waited)


def test_async_results_equal_the_blocking_clients(pipeline):
    async def one():
        async with AsyncClient(settings=pipeline.settings) as c:
            job = await c.submit(JobSpec.new([2], steps=STEPS, seed=3), priority=5)
            return job, await c.result(job, timeout=120)

    job, x = asyncio.run(one())
    with pipeline.client() as client:
        assert np.array_equal(client.result(job, timeout=10), x)


def test_async_generate_equals_the_blocking_clients(pipeline):
    """AsyncClient.generate (before: no such call) makes the rows Client.generate makes (3,8,3,8) and the
    same images for the same seed."""

    async def one():
        async with AsyncClient(settings=pipeline.settings) as c:
            return await c.generate([3, 8], n=2, steps=STEPS, seed=4, timeout=120)

    x = asyncio.run(one())
    with pipeline.client() as client:
        want = client.generate([3, 8], n=2, steps=STEPS, seed=4, timeout=120)
    assert x.shape == want.shape == (4, 1, 32, 32)
    assert np.abs(x - want).max() <= 1e-4  # batched beside other rows: the same within float noise
