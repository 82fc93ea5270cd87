from __future__ import annotations

import pytest

from tests.support.scheduling import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
