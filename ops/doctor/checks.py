"""The record every doctor check returns, what the doctor is asked, and the guard that turns a check's
unexpected error into a FAIL instead of the end of the doctor."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

OK, FAIL, SKIP = "ok", "FAIL", "skip"
ROLES = ("all", "client", "router", "expert")  # all: what `ddm up` runs here (experts, router, web UI)


@dataclass(frozen=True)
class DoctorOptions:
    role: str = "all"
    deployment: Path | None = None  # None: $DDM_DEPLOYMENT, else the shipped one (resolve_deployment)
    expert: int | None = None  # role expert: only this expert's needs (None: every expert's)
    data_dir: str | None = None  # None: $DDM_DATA_DIR, else ./data


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # OK, FAIL or SKIP
    detail: str
    fix: str = ""  # how to make a FAIL pass

    @property
    def failed(self) -> bool:
        return self.status == FAIL

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def guarded(name: str, check: Callable[[], Check]) -> Check:
    """check(), or a FAIL naming the error it raised (the doctor reports every check it can)."""
    try:
        return check()
    except Exception as exc:  # noqa: BLE001 - a doctor that crashes on what it diagnoses helps no one
        return Check(name, FAIL, f"{type(exc).__name__}: {exc}", "see the error above")
