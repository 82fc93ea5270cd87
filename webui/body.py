"""An API request's JSON body, or BodyError saying what was expected and what arrived.

Flask's get_json(silent=True) answers None for every problem alike, so a 5,000-digit number, invalid
UTF-8 and a missing Content-Type all read "expected a JSON object". Here each gets its own message and
status: 415 for a body that is not declared JSON, 400 for one that does not parse.
"""

from __future__ import annotations

import json
import sys

from ddm.schema.errors import expected

# what a RecursionError inside json means; tests/webui/test_deep_json.py pins these words
TOO_DEEP = "expected a JSON object, got JSON nested too deeply to parse"


class BodyError(ValueError):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def json_body(request) -> object:
    """The parsed JSON of a Flask request (any JSON value: the caller says what it needs)."""
    if not request.is_json:
        raise BodyError(415, expected("Content-Type: application/json", request.content_type or "none"))
    raw = request.get_data(cache=False)
    if not raw.strip():
        raise BodyError(400, "expected a JSON object, got an empty body")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyError(
            400, f"expected JSON in UTF-8, got the byte 0x{raw[exc.start]:02x} at byte {exc.start}, not UTF-8"
        ) from None
    try:
        return json.loads(text)
    except RecursionError:  # json's parser recurses per level: [[[...]]] 30,000 deep exhausts it
        raise BodyError(400, TOO_DEEP) from None
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise BodyError(400, f"expected JSON, got text that is not JSON at {where}: {exc.msg}") from None
    except ValueError:  # int() refuses a literal past sys.get_int_max_str_digits()
        limit = sys.get_int_max_str_digits()
        raise BodyError(
            400, f"expected numbers of at most {limit} digits, got an integer with more"
        ) from None
