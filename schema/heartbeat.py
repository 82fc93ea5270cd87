"""The worker heartbeat record: what a running worker says about itself, every few seconds.

    HSET   <prefix>ddm:worker:<worker_id>  WorkerHeartbeat.encode()   (all values strings)
    EXPIRE <that key> heartbeat_ttl_s      (a worker that stops beating disappears by itself)
    SADD   <prefix>ddm:workers  worker_id  (an index; readers skip ids whose record has expired)

Every worker: worker_id, role ('expert' | 'router' | 'decoder' | 'text-encoder'), host, region, pid,
started_at, updated_at.
Experts add expert_id, framework, device, precision (fp32 | tf32 | bf16), queue, max_batch, max_wait_ms,
buckets ("1,2,4" or "any"), weights_bytes (its weights as held) and rss_bytes (the process's resident set);
routers add deployment and jobs_running. weights_bytes and rss_bytes are gauges; every other field is
a counter (a number): experts write requests, batches, rows, mean_batch_size, mean_compute_ms,
dead_lettered; routers jobs_done,
jobs_failed, steps, resends, hedges; both reconnects. The one writer is ddm/runtime/heartbeat.py
(Heartbeat), used by the consumer runtime both workers run on; readers (the web UI, `ddm up`, tests)
decode through here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from .errors import SchemaError, expected
from .names import check_expert_id, check_worker_id

ROLES = ("expert", "router", "decoder", "text-encoder")  # the stages write the expert counters
# The counters each role writes: the one list. The stats objects that count them (ddm/runtime/heartbeat.py
# WorkerStats, RouterStats) write exactly these, by name; reconnects is counted by the consumer runtime.
EXPERT_COUNTERS = (
    "requests", "batches", "rows", "mean_batch_size", "mean_compute_ms", "dead_lettered", "reconnects"
)  # fmt: skip
ROUTER_COUNTERS = ("jobs_done", "jobs_failed", "steps", "resends", "hedges", "reconnects")
MAX_TEXT = 200
_INT_RE = re.compile(r"-?[0-9]{1,18}")
_NUMBER_RE = re.compile(r"[-+0-9.eE]{1,40}|nan|inf|-inf")  # what a counter looks like (checked after)
_BUCKETS_RE = re.compile(r"[0-9]{1,6}(,[0-9]{1,6}){0,63}")


def _text(value: bytes | str) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _number(name: str, text: str) -> int | float:
    if _INT_RE.fullmatch(text):
        return int(text)
    try:
        value = float(text)
    except ValueError:
        raise SchemaError(expected(f"heartbeat {name} as a number", text)) from None
    if not math.isfinite(value):
        raise SchemaError(expected(f"heartbeat {name} finite", text))
    return value


def parse_buckets(value: object) -> tuple[int, ...]:
    """Batch buckets as written ("1,2,4", or "any" for an eager expert: ()) or as a sequence of ints."""
    if isinstance(value, str):
        if value == "any":
            return ()
        if not _BUCKETS_RE.fullmatch(value):
            raise SchemaError(expected("buckets like '1,2,4' or 'any'", value))
        return tuple(int(b) for b in value.split(","))
    if isinstance(value, list | tuple) and all(type(b) is int and b >= 1 for b in value):
        return tuple(value)
    raise SchemaError(expected("buckets as ints >= 1", value))


@dataclass(frozen=True)
class WorkerHeartbeat:
    """One worker's heartbeat. Fields a worker did not write are None; counters map name -> number."""

    worker_id: str
    role: Literal["expert", "router", "decoder", "text-encoder"]
    updated_at: float
    started_at: float | None = None
    host: str | None = None
    region: str | None = None
    pid: int | None = None
    # experts
    expert_id: int | None = None
    framework: str | None = None
    device: str | None = None
    precision: str | None = None
    queue: str | None = None
    max_batch: int | None = None
    max_wait_ms: float | None = None
    buckets: tuple[int, ...] | None = None  # () = any batch size (eager)
    weights_bytes: int | None = None  # the expert's weights as held in memory (ddm.workers.memory)
    rss_bytes: int | None = None  # the worker process's resident memory at this beat
    # routers
    deployment: str | None = None
    jobs_running: int | None = None
    counters: Mapping[str, int | float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_worker_id(self.worker_id)
        if self.role not in ROLES:
            raise SchemaError(expected(f"heartbeat role in {list(ROLES)}", self.role))
        if self.role == "expert":
            check_expert_id(self.expert_id)
        for name in FLOAT_FIELDS:
            value = getattr(self, name)
            if value is not None and (not _is_number(value) or not math.isfinite(value)):
                raise SchemaError(expected(f"heartbeat {name} as a finite number", value))
            if value is not None:
                object.__setattr__(self, name, float(value))
        for name in INT_FIELDS:
            value = getattr(self, name)
            if value is not None and type(value) is not int:
                raise SchemaError(expected(f"heartbeat {name} as an int", value))
        for name in TEXT_FIELDS:
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise SchemaError(expected(f"heartbeat {name} as a str", value))
        if self.buckets is not None:
            object.__setattr__(self, "buckets", parse_buckets(self.buckets))
        known = {f.name for f in fields(self)}
        for name, value in self.counters.items():
            if name in known or not isinstance(name, str):
                raise SchemaError(expected("counter names that are not record fields", name))
            if not _is_number(value) or not math.isfinite(value):
                raise SchemaError(expected(f"heartbeat counter {name} as a finite number", value))
        object.__setattr__(self, "counters", dict(self.counters))

    @classmethod
    def build(cls, values: Mapping[str, object]) -> WorkerHeartbeat:
        """A record from Python values: the named fields, every other key a counter."""
        names = {f.name for f in fields(cls)} - {"counters"}
        known = {k: v for k, v in values.items() if k in names}
        return cls(**known, counters={k: v for k, v in values.items() if k not in names})

    def encode(self) -> dict[str, str]:
        """The HSET mapping (str -> str); fields that are None are left out."""
        out: dict[str, str] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "counters" or value is None:
                continue
            if f.name == "buckets":
                out[f.name] = ",".join(map(str, value)) or "any"
            else:
                out[f.name] = repr(value) if isinstance(value, float) else str(value)
        out |= {k: repr(v) if isinstance(v, float) else str(v) for k, v in self.counters.items()}
        return out

    @classmethod
    def decode(cls, raw: Mapping) -> WorkerHeartbeat:
        """The hash as Redis returns it (bytes or str) -> WorkerHeartbeat; SchemaError otherwise."""
        beat = {_text(k): _text(v) for k, v in raw.items()}
        missing = [k for k in ("worker_id", "role", "updated_at") if k not in beat]
        if missing:
            raise SchemaError(expected(f"a heartbeat with {missing}", sorted(beat)))
        values: dict[str, Any] = {}
        for key, text in beat.items():
            if key in ("worker_id", "role"):
                values[key] = text
            elif key in TEXT_FIELDS:
                values[key] = text[:MAX_TEXT]
            elif key == "buckets":
                values[key] = parse_buckets(text)
            elif key in INT_FIELDS:
                if not _INT_RE.fullmatch(text):
                    raise SchemaError(expected(f"heartbeat {key} as an integer", text))
                values[key] = int(text)
            elif key in FLOAT_FIELDS:
                values[key] = float(_number(key, text))
            elif key in EXPERT_COUNTERS + ROUTER_COUNTERS or _NUMBER_RE.fullmatch(text):
                values[key] = _number(key, text)
            # else: a text field of a newer worker; skipped, so a reader need not be upgraded first
        return cls.build(values)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly: the fields that are set, counters inline (as the web UI's pages read them)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "counters"}
        out = {k: v for k, v in out.items() if v is not None}
        if self.buckets is not None:
            out["buckets"] = list(self.buckets)
        return out | dict(self.counters)


def _fields_typed(*types: str) -> tuple[str, ...]:
    """The record's fields annotated with one of `types` (how they decode follows from the type)."""
    return tuple(f.name for f in fields(WorkerHeartbeat) if f.type in types)


INT_FIELDS = _fields_typed("int | None")
FLOAT_FIELDS = _fields_typed("float", "float | None")
TEXT_FIELDS = _fields_typed("str | None")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
