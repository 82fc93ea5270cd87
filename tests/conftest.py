"""Root fixtures: the real RabbitMQ and Redis (URLs, a unique prefix per test, cleaned up afterwards)
and small random-weight deployments (no training needed). Helpers live in tests/support."""

from __future__ import annotations

import logging
import os
from pathlib import Path

# Single-threaded math keeps tests predictable on the 2-core CI machine (set before torch/jax load).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import numpy as np  # noqa: E402 - after the env
import pytest  # noqa: E402

from ddm.schema.settings import Settings  # noqa: E402
from tests.__main__ import SERIAL_FILES_ENV, SERIAL_MARKS  # noqa: E402
from tests.support import services  # noqa: E402
from tests.support.fakes import write_random_deployment  # noqa: E402


def _share_jax_compilations() -> None:
    """Every JAX compile of a test process (training, init, a direct jit) goes to the persistent cache the
    expert workers already use (DDM_JAX_CACHE_DIR, default ~/.cache/ddm/jax): a program compiled once is
    loaded by every other process and run that compiles it again (JAX reads this before it loads)."""
    cache = Settings.from_env().jax_cache_dir
    if cache.lower() not in ("", "0", "off", "none"):
        os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.expanduser(cache))


_share_jax_compilations()



# Files whose tests start a browser, a pipeline of worker processes or a benchmark run: the longest. With
# --dist loadfile, pytest-xdist hands files to workers in collection order, so these go first and the
# quick files fill the end, instead of one worker running a 2-minute browser test while the others idle.
SLOW_FIRST = ("webui/test_browser", "pipeline/", "ops/bench/")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(item.get_closest_marker(mark) for mark in SERIAL_MARKS):
            item.add_marker(pytest.mark.serial)
    _check_serial_files(config, items)
    items.sort(key=_runs_last)  # stable: files keep their order within each group


def _runs_last(item) -> bool:
    relative = item.path.resolve().relative_to(Path(__file__).resolve().parent).as_posix()
    return not relative.startswith(SLOW_FIRST)


def _check_serial_files(config, items) -> None:
    """Under `python -m tests`, the serial phase collects only the files tests/__main__.py found marking a
    serial test: a serial test elsewhere (a mark written another way) would run in neither phase."""
    listed = os.environ.get(SERIAL_FILES_ENV)
    if not listed:
        return
    listed_paths = {Path(f).resolve() for f in listed.split(os.pathsep)}
    serial = (i for i in items if i.get_closest_marker("serial"))
    missed = sorted({str(i.path) for i in serial if i.path.resolve() not in listed_paths})
    if missed:
        raise pytest.UsageError(
            f"serial tests in files tests/__main__.py's serial_files() did not find: {missed}; "
            "mark them with pytest.mark.serial (or broker_restart, cluster, load) as written there"
        )


@pytest.fixture(autouse=True)
def restore_root_logging():
    """A test that runs `ddm up` or `ddm worker` in-process gets its logging set up (ddm/runtime/logs.py) on
    pytest's captured stderr: put the root logger back, so later tests do not log to a closed stream."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(scope="session")
def amqp_url() -> str:
    """DDM_AMQP_URL, else the local broker."""
    return services.AMQP_URL


@pytest.fixture(scope="session")
def redis_url() -> str:
    """DDM_REDIS_URL, else the local Redis."""
    return services.REDIS_URL


@pytest.fixture
def prefix() -> str:
    """A queue and key prefix of this test's own; its queues and keys are deleted afterwards."""
    p = services.new_prefix()
    yield p
    services.cleanup_prefix(p)


@pytest.fixture
def settings(prefix, amqp_url, redis_url) -> Settings:
    """Service settings on this test's prefix."""
    return Settings(prefix=prefix, amqp_url=amqp_url, redis_url=redis_url)


@pytest.fixture(scope="session")
def label_split_deployment(tmp_path_factory) -> Path:
    """The seed's shape at test size: expert 0 (digits 0-4) in PyTorch, expert 1 (5-9) in JAX."""
    experts = [("e0_torch", "torch", range(0, 5), 0), ("e1_jax", "jax", range(5, 10), 1)]
    return write_random_deployment(tmp_path_factory.mktemp("label_split"), experts, router="oracle")


@pytest.fixture(scope="session")
def shared_labels_deployment(tmp_path_factory) -> Path:
    """Two torch experts whose label sets overlap, routed by the label prior (top-k/full differ)."""
    experts = [("a", "torch", range(0, 7), 2), ("b", "torch", range(3, 10), 3)]
    return write_random_deployment(tmp_path_factory.mktemp("shared_labels"), experts, router="label-prior")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)
