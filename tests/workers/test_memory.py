"""An expert's memory (ddm.workers.memory, issue 38 part 5): weights counted from the safetensors header,
bf16 PyTorch experts holding half the bytes, and a worker whose weights cannot fit refused at start with
the sizes named, in a real memory cgroup (v1 or v2, made for the test and removed after)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from ddm.schema.conditioning import Conditioning, TextEncoderSpec
from ddm.schema.errors import DeviceError
from ddm.schema.expert_card import FLOW_VELOCITY, T0_DATA, Objective, stamp_card
from ddm.schema.sample_space import SampleSpace
from ddm.workers.memory import check_fits, held_bytes, parameter_count
from ddm.workers.paris.config import ParisExpertConfig, expert_shapes
from ddm.workers.paris.config import parameter_count as shape_count
from tests.support.paris_fixture import TINY_EXPERT, random_state

TEXT = TextEncoderSpec("openai/clip-vit-large-patch14", "0" * 64, "clip-bpe", 77, 24, "tokens")


def write_paris_expert(folder: Path, config: ParisExpertConfig = TINY_EXPERT, seed: int = 0) -> Path:
    """A Paris expert checkpoint: random weights in Paris's names, its meta.json as `ddm import` writes."""
    from safetensors.torch import save_file

    from ddm.schema.checkpoint_meta import file_sha256, write_meta
    from ddm.workers.checkpoint import expert_meta
    from ddm.workers.paris.torch_model import ParisExpert

    folder.mkdir(parents=True)
    weights = folder / "diffusion_pytorch_model.safetensors"
    save_file(random_state(ParisExpert(config), seed), str(weights))
    space = SampleSpace((config.channels, config.image_size, config.image_size), (-8.0, 8.0))
    meta = expert_meta(
        "torch",
        "imported",
        0,
        {"id": "test"},
        [],
        architecture="paris",
        objective=Objective(FLOW_VELOCITY, None, T0_DATA),
        sample_space=space,
        conditioning=Conditioning("text", TEXT),
        config=config,
        weights=weights.name,
    )
    write_meta(folder, stamp_card(meta, file_sha256(weights)))
    return folder


def test_weights_are_counted_from_the_header(tmp_path):
    folder = write_paris_expert(tmp_path / "e")
    weights = folder / "diffusion_pytorch_model.safetensors"
    count = shape_count(expert_shapes(TINY_EXPERT))
    assert parameter_count(weights) == count
    assert held_bytes(weights, 4) == 4 * count and held_bytes(weights, 2) == 2 * count


def test_a_bf16_expert_holds_half_and_answers_within_bf16_tolerance(tmp_path):
    from ddm.workers import load_expert
    from ddm.workers.selftest import TOLERANCE

    folder = write_paris_expert(tmp_path / "e")
    fp32, bf16 = load_expert(folder, "cpu"), load_expert(folder, "cpu", precision="bf16")
    assert (
        bf16.weights_bytes * 2
        == fp32.weights_bytes
        == 4 * parameter_count(next(folder.glob("*.safetensors")))
    )
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 8, 8), dtype=np.float32)
    t = np.array([0.2, 0.9], np.float32)
    cond = rng.standard_normal((2, 77, 24), dtype=np.float32)
    want, got = fp32.velocity(x, t, cond=cond), bf16.velocity(x, t, cond=cond)
    assert got.dtype == np.float32
    rms = float(np.sqrt(np.mean(want.astype(np.float64) ** 2)))
    assert 0 < np.abs(got - want).max() / rms <= TOLERANCE["bf16"]


def test_the_refusal_names_the_sizes():
    with pytest.raises(DeviceError) as refused:
        check_fits("expert 3 (w.safetensors)", 2_423_881_792, 4_847_763_584, 1_000_000_000, "cpu", "fp32")
    message = str(refused.value)
    assert "expert 3" in message and "2.42 GB in fp32" in message and "4.85 GB while loading" in message
    assert "1.00 GB is free" in message and 'precision = "bf16"' in message
    check_fits("expert 3", 2_423_881_792, 4_847_763_584, None, "neuron", "fp32")  # unknown: not checked
    check_fits("expert 3", 400, 800, 1_000, "cpu", "fp32")


def _memory_cgroup(limit: int):
    """(folder, path of its procs file) of a new memory cgroup with `limit` bytes, or skip."""
    name = f"ddm-test-{uuid.uuid4().hex[:8]}"
    for folder, limit_file in (
        (Path("/sys/fs/cgroup/memory") / name, "memory.limit_in_bytes"),  # v1
        (Path("/sys/fs/cgroup") / name, "memory.max"),  # v2
    ):
        try:
            folder.mkdir()
        except OSError:
            continue
        try:
            (folder / limit_file).write_text(str(limit))
            return folder
        except OSError:
            folder.rmdir()
    pytest.skip("no writable memory cgroup here (root on cgroup v1 or v2 is needed)")


@pytest.mark.parametrize("limit_mb, refused", [(700, True), (3000, False)])
def test_an_expert_that_cannot_fit_is_refused_at_start_naming_the_sizes(tmp_path, limit_mb, refused):
    """69M parameters (277 MB in float32; 554 MB while loading: the file's tensors beside the model's) in
    a cgroup of 700 MB, of which the Python process with torch takes a few hundred (the page cache of the
    hashed file is not counted): refused before loading, naming the sizes. With 3 GB the same load
    succeeds (the check can pass, and it is the check that refused)."""
    big = ParisExpertConfig(width=512, depth=16, heads=8, patch=2, channels=4, image_size=8, text_width=24)
    folder = write_paris_expert(tmp_path / "big", big)
    cgroup = _memory_cgroup(limit_mb * 1_000_000)
    code = (
        f"import os; open({str(cgroup / 'cgroup.procs')!r}, 'w').write(str(os.getpid()))\n"
        "from ddm.workers import load_expert\n"
        f"load_expert({str(folder)!r}, 'cpu')\n"
        "print('loaded')"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=dict(os.environ)
        )
    finally:
        cgroup.rmdir()
    if refused:
        assert done.returncode != 0
        assert "does not fit on cpu" in done.stderr and "GB while loading" in done.stderr, done.stderr[-2000:]
        assert "0.28 GB in fp32" in done.stderr
    else:
        assert done.returncode == 0 and "loaded" in done.stdout, done.stderr[-2000:]
