"""How `ddm` commands print JSON (`--json`): one object or list on stdout, nothing else there."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _jsonable(value: object) -> object:
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if hasattr(value, "tolist"):  # numpy arrays
        return value.tolist()
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def print_json(data: object) -> None:
    print(json.dumps(data, indent=2, default=_jsonable), file=sys.stdout, flush=True)
