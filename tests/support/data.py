"""Real data sets a test may read where they are present (it skips elsewhere)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# The shared data folder beside the checkout, or DDM_DATA_DIR.
SHARED = Path(os.environ.get("DDM_DATA_DIR") or Path(__file__).resolve().parents[3] / "shared" / "data")
SHARED_MNIST_TEST = SHARED / "mnist" / "t10k-images-idx3-ubyte.gz"


def needs_shared_mnist() -> None:
    """Skip the calling test unless the real MNIST test split is there."""
    if not SHARED_MNIST_TEST.exists():
        pytest.skip(f"real MNIST test split not present at {SHARED_MNIST_TEST} (set DDM_DATA_DIR)")
