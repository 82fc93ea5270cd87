"""`ddm up`'s ready line names a job the serving deployment takes (issue 40's quick start, followed on
the shipped deployments): before, it said `ddm submit --label 7 --wait` on every one, which the text
deployment refuses (it reads prompts, not labels)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddm.ops.up.bringup import submit_hint
from ddm.schema.deployment import Deployment

SHIPPED = Path(__file__).resolve().parents[3] / "checkpoints"


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("mnist", "ddm submit --label 7 --wait"),
        ("fashion-mnist", "ddm submit --label 7 --wait"),
        ("emoji-latent", "ddm submit --label 7 --wait"),
        ("emoji-text", 'ddm submit --prompt "red heart" --wait'),
    ],
)
def test_the_hint_is_a_job_the_deployment_takes(name, hint):
    assert submit_hint(Deployment.load(SHIPPED / name / "deployment.toml")) == hint
