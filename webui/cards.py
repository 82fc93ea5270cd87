"""An expert's card (architecture, framework, objective) in the words the cluster panel shows.

    card_text({"framework": "jax", "architecture": "dit", "objective": "ddpm-eps",
               "schedule": {"name": "cosine", "s": 0.008}, "time_convention": "t0-data"})
        -> "DiT · Flax · DDPM ε (cosine)"
    card_detail(same) -> "architecture dit, framework jax, objective ddpm-eps under the cosine VP
        schedule (s=0.008), time t0-data (0 = data); served as the deployment's velocity"

The card is the descriptor's per-expert summary of the checkpoint's expert card (schema/expert_card.py);
a descriptor from a router before cards has none, and the panel then shows no card line. Names this
module does not know are shown as they are, never refused: the schema validates, the page only reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ARCHITECTURES = {"unet": "UNet", "dit": "DiT"}
FRAMEWORKS = {"torch": "PyTorch", "jax": "Flax"}
OBJECTIVES = {
    "flow-velocity": "flow velocity",
    "ddpm-eps": "DDPM ε",
    "ddpm-x0": "DDPM x₀",
    "ddpm-v": "DDPM v",
}
TIME_CONVENTIONS = {"t0-noise": "0 = noise", "t0-data": "0 = data"}


def _schedule(card: Mapping[str, Any]) -> tuple[str, str]:
    """(name, parameters as 'k=v, ...') of the card's schedule: a {"name", params...} object or a name."""
    schedule = card.get("schedule")
    if isinstance(schedule, Mapping):
        name = str(schedule.get("name", ""))
        params = ", ".join(
            f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in schedule.items() if k != "name"
        )
        return name, params
    return (str(schedule), "") if schedule else ("", "")


def card_text(card: Mapping[str, Any] | None) -> str:
    """'DiT · Flax · DDPM ε (cosine)', 'UNet · PyTorch · flow velocity'; '' without a card."""
    if not isinstance(card, Mapping):
        return ""
    parts = []
    for key, words in (("architecture", ARCHITECTURES), ("framework", FRAMEWORKS)):
        value = card.get(key)
        if value:
            parts.append(words.get(str(value), str(value)))
    objective = card.get("objective")
    if objective:
        text = OBJECTIVES.get(str(objective), str(objective))
        name, _ = _schedule(card)
        parts.append(f"{text} ({name})" if name else text)
    return " · ".join(parts)


def card_detail(card: Mapping[str, Any] | None) -> str:
    """Every field of the card in one sentence (the card line's tooltip); '' without a card."""
    if not isinstance(card, Mapping):
        return ""
    bits = [f"{key} {card[key]}" for key in ("architecture", "framework") if card.get(key)]
    objective = card.get("objective")
    if objective:
        name, params = _schedule(card)
        schedule = f" under the {name} VP schedule" + (f" ({params})" if params else "") if name else ""
        bits.append(f"objective {objective}{schedule}")
    convention = card.get("time_convention")
    if convention:
        meaning = TIME_CONVENTIONS.get(str(convention))
        bits.append(f"time {convention}" + (f" ({meaning})" if meaning else ""))
    if not bits:
        return ""
    return ", ".join(bits) + "; served as the deployment's velocity"
