"""How many rows one slice of an oversize batch may hold, so that a busy expert worker still beats.

Between slices the worker services its connection (AMQP heartbeats, the Redis heartbeat timer): a slice
that runs longer than the heartbeat allowance (DDM_HEARTBEAT_TTL_S - DDM_HEARTBEAT_S) hides the worker,
and the routers take it for gone (issue 36). So slices are sized from the time a row takes on this
device, measured at start and after every batch, to use at most half the allowance: the largest size
(a compiled bucket, where the backend has buckets, so no slice is padded) whose rows fit, never fewer
than the smallest.
"""

from __future__ import annotations

SHARE_OF_ALLOWANCE = 0.5  # the rest is margin: a slice's time varies with the machine's load
DECAY = 0.9  # a slow batch raises the per-row time at once; faster ones bring it down slowly


class SliceSizer:
    def __init__(self, sizes: tuple[int, ...], allowance_s: float):
        if not sizes or min(sizes) < 1 or allowance_s <= 0:
            raise ValueError(f"expected slice sizes >= 1 and an allowance > 0, got {sizes}, {allowance_s}")
        self.sizes = tuple(sorted(sizes))
        self.budget_s = SHARE_OF_ALLOWANCE * allowance_s
        self.s_per_row = 0.0  # unknown until observed: the largest size

    def observe(self, rows: int, seconds: float) -> None:
        """A forward pass of `rows` rows took `seconds`."""
        if rows > 0 and seconds >= 0:
            self.s_per_row = max(seconds / rows, DECAY * self.s_per_row)

    @property
    def rows(self) -> int:
        """The largest size whose expected time fits the budget (the smallest when none does)."""
        fitting = [n for n in self.sizes if n * self.s_per_row <= self.budget_s]
        return fitting[-1] if fitting else self.sizes[0]
