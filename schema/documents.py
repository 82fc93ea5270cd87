"""Reading a JSON or TOML document a person points a command at, with the errors that say which file
and what was wrong with it (missing, or not valid JSON / TOML): one wording for every such reader."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from ddm.schema.errors import ConfigError, expected

_LANGUAGES = {  # suffix-free: the caller says which language it expects
    "json": (json.loads, json.JSONDecodeError, "not valid JSON"),
    "toml": (tomllib.loads, tomllib.TOMLDecodeError, "invalid TOML"),
}


def read_document(path: str | Path, what: str, language: str = "json") -> object:
    """The parsed content of `path` ("json" or "toml"). ConfigError: 'expected <what>, got <path> (not
    found)', or '<path>: not valid JSON (<why>)'. What the content must hold is the caller's to check."""
    loads, error, wrong = _LANGUAGES[language]
    path = Path(path)
    if not path.is_file():
        raise ConfigError(expected(what, f"{path} (not found)"))
    try:
        return loads(path.read_text())
    except error as exc:
        raise ConfigError(f"{path}: {wrong} ({exc})") from None
