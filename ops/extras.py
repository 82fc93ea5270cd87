"""The install extras (pyproject.toml) seen from the code: which extra brings which import, and the one
message a command gives when its extra is missing.

The base install (`pip install ddm-pipeline`) submits and follows jobs; the rest comes in extras:
one per expert framework (torch, jax: ddm.workers.frameworks names each one's), ui, train (both
frameworks and plots), import (other people's checkpoints: transformers, diffusers), all. A command
imports what it needs inside its main, so `ddm COMMAND --help` works everywhere and a missing extra
shows up as a ModuleNotFoundError that `ddm` turns into this message.
"""

from __future__ import annotations

import importlib.util

from ddm.workers.frameworks import FRAMEWORKS

DISTRIBUTION = "ddm-pipeline"

# top-level import name -> the extra that installs it: each expert framework's (its registry record,
# metadata only: importing it imports no framework), then the web UI's and the training extra's
EXTRA_OF_MODULE: dict[str, str] = {
    **{module: f.extra for f in FRAMEWORKS.values() for module in f.modules},
    "flask": "ui",
    "flask_socketio": "ui",
    "simple_websocket": "ui",
    "gunicorn": "ui",
    "werkzeug": "ui",
    "matplotlib": "train",
    "transformers": "import",  # CLIP's text model and tokenizer (ddm import paris)
    "diffusers": "import",  # AutoencoderKL, DiTTransformer2DModel (ddm import paris|dit)
}


def extra_for(module: str | None) -> str | None:
    """The extra that installs `module` ('flax.linen' -> 'jax'), or None for a module of no extra."""
    return EXTRA_OF_MODULE.get((module or "").split(".")[0])


def missing_extra_message(command: str, extra: str) -> str:
    return f"ddm {command} needs the {extra} extra: pip install '{DISTRIBUTION}[{extra}]'"


def missing_modules(extra: str) -> list[str]:
    """The modules of `extra` that this environment cannot import (find_spec: nothing is imported)."""
    return [
        m for m, owner in EXTRA_OF_MODULE.items() if owner == extra and importlib.util.find_spec(m) is None
    ]


def require(extra: str) -> None:
    """Raise ModuleNotFoundError (named as an import failure is) unless every module of `extra` is
    importable: for commands that would otherwise start work, or processes, before the import fails."""
    for module in missing_modules(extra)[:1]:
        raise ModuleNotFoundError(f"No module named {module!r}", name=module)
