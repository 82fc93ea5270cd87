"""Deployment files (TOML): which experts serve, from which checkpoint, on which device, routed how.

    name = "mnist-label-split"
    guidance = 2.0               # optional: the classifier-free guidance scale jobs get by default

    [[experts]]
    id = 0                       # ids are 0..K-1: the cluster ids of the partition
    checkpoint = "expert0_torch" # relative to this file
    device = "auto"              # torch: auto|cpu|cuda|neuron|cpu-traced; jax: auto|cpu|gpu

    [[experts]]
    id = 1
    checkpoint = "expert1_jax"

    [router]
    kind = "oracle"              # oracle | label-prior | learned
    checkpoint = "router"        # learned only

Read by `ddm sample --local`, the workers, `ddm up`, eval and bench.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from ddm.schema.errors import ConfigError, expected
from ddm.schema.messages import MAX_GUIDANCE

ROUTER_KINDS = ("oracle", "label-prior", "learned")
# What `ddm sample --local`, `ddm up` and the client use when no deployment is given (the shipped demo).
DEFAULT_DEPLOYMENT = Path("checkpoints/mnist/deployment.toml")


@dataclass(frozen=True)
class ExpertEntry:
    id: int
    checkpoint: Path  # absolute
    device: str = "auto"


@dataclass(frozen=True)
class RouterEntry:
    kind: str = "oracle"
    checkpoint: Path | None = None  # absolute; learned routers only


@dataclass(frozen=True)
class Deployment:
    name: str
    path: Path
    experts: tuple[ExpertEntry, ...]
    router: RouterEntry
    # The guidance `ddm sample`, `ddm eval`, `ddm submit` and the web UI use when none is given: the
    # deployment's owner knows what its experts were trained for (label dropout) and evaluated at.
    guidance: float = 1.0

    @property
    def num_experts(self) -> int:
        return len(self.experts)

    def expert(self, expert_id: int) -> ExpertEntry:
        if not 0 <= expert_id < len(self.experts):
            raise ConfigError(expected(f"an expert id in [0, {len(self.experts)}) of {self.path}", expert_id))
        return self.experts[expert_id]

    @classmethod
    def load(cls, path: str | Path) -> Deployment:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(expected("a deployment TOML file", f"{path} (not found)"))
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML ({exc})") from None
        return cls.from_dict(data, path)

    @classmethod
    def from_dict(cls, data: dict, path: Path) -> Deployment:
        base = path.resolve().parent
        unknown = set(data) - {"name", "guidance", "experts", "router"}
        if unknown:
            raise ConfigError(f"{path}: {expected('keys name, guidance, experts, router', sorted(unknown))}")
        guidance = data.get("guidance", 1.0)
        if type(guidance) not in (int, float) or not 0.0 <= guidance <= MAX_GUIDANCE:
            raise ConfigError(f"{path}: {expected(f'guidance, a number in [0, {MAX_GUIDANCE:g}]', guidance)}")
        raw_experts = data.get("experts")
        if not isinstance(raw_experts, list) or not raw_experts:
            raise ConfigError(f"{path}: {expected('at least one [[experts]] table', raw_experts)}")
        experts = []
        for i, entry in enumerate(raw_experts):
            if not isinstance(entry, dict) or set(entry) - {"id", "checkpoint", "device"}:
                raise ConfigError(f"{path}: {expected('[[experts]] with id, checkpoint, device', entry)}")
            if entry.get("id") != i:
                raise ConfigError(
                    f"{path}: {expected(f'expert ids 0..K-1 in order, so id = {i} here', entry.get('id'))}"
                )
            if not isinstance(entry.get("checkpoint"), str):
                raise ConfigError(
                    f"{path}: {expected(f'experts[{i}].checkpoint, a folder path', entry.get('checkpoint'))}"
                )
            device = entry.get("device", "auto")
            if not isinstance(device, str):
                raise ConfigError(f"{path}: {expected(f'experts[{i}].device as a string', device)}")
            experts.append(ExpertEntry(id=i, checkpoint=(base / entry["checkpoint"]), device=device))
        raw_router = data.get("router", {"kind": "oracle"})
        kind = raw_router.get("kind", "oracle") if isinstance(raw_router, dict) else raw_router
        if kind not in ROUTER_KINDS or set(raw_router) - {"kind", "checkpoint"}:
            raise ConfigError(
                f"{path}: {expected(f'[router] kind in {ROUTER_KINDS} (and checkpoint)', raw_router)}"
            )
        checkpoint = raw_router.get("checkpoint")
        if (kind == "learned") != (checkpoint is not None):
            raise ConfigError(
                f"{path}: {expected('[router] checkpoint exactly when kind = learned', raw_router)}"
            )
        router = RouterEntry(kind=kind, checkpoint=(base / checkpoint) if checkpoint else None)
        return cls(
            name=str(data.get("name", path.stem)),
            path=path.resolve(),
            experts=tuple(experts),
            router=router,
            guidance=float(guidance),
        )
