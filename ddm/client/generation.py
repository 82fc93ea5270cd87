"""The JobSpec of a one-call generation, shared by Client.generate, AsyncClient.generate and
HttpClient.generate: one home for how `labels` and `n` become a job's rows."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ddm.schema.errors import SchemaError, expected
from ddm.schema.messages import JobSpec


def generation_spec(labels: int | Sequence[int | None] | None, n: int, **options) -> JobSpec:
    """labels: one label or a list, 0..K-1 or None (an unconditional image); the list repeated n times (n
    images per label, as `ddm submit --labels 3,8 --n 2` gives 3,8,3,8); None alone: n unconditional
    images, what a text deployment's job carries. options: JobSpec's (schema/messages.py JOB_OPTIONS)."""
    base = [labels] if labels is None or isinstance(labels, int | np.integer) else list(labels)
    if not isinstance(n, int | np.integer) or isinstance(n, bool) or n < 1:
        raise SchemaError(expected("n >= 1 images per label", n))
    return JobSpec.new(base * int(n), **options)
