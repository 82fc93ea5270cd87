"""Request bodies nested deeper than a JSON parser goes are a 400 with a clear message, never a 500."""

from __future__ import annotations

import pytest


def nested(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


@pytest.mark.parametrize(
    "body",
    [
        nested(30_000),  # json recurses once per level: RecursionError inside get_json
        '{"labels": ' + nested(30_000) + "}",
        '{"labels": [1], "steps": ' + nested(30_000) + "}",
        '{"a":' * 10_000 + "1" + "}" * 10_000,  # 60 kB: under the 64 KiB request limit
    ],
    ids=["array", "labels", "steps", "object"],
)
def test_json_nested_too_deep_is_a_400(make_app, fake, body):
    http = make_app().test_client()
    resp = http.post("/api/jobs", data=body, content_type="application/json")
    assert resp.status_code == 400, resp.data[:300]
    assert resp.get_json() == {
        "ok": False,
        "kind": "bad_input",
        "error": "expected a JSON object, got JSON nested too deeply to parse",
    }


@pytest.mark.parametrize("field", ["labels", "steps", "strategy", "guidance", "seed", "n_per_label"])
@pytest.mark.parametrize("depth", [2, 50, 900])
def test_nesting_the_parser_takes_is_refused_by_validation(make_app, fake, field, depth):
    """Deep but parseable values reach the form check, which refuses them (and does not recurse)."""
    fake.all_workers()
    http = make_app().test_client()
    labels = "" if field == "labels" else '"labels": [1], '
    body = "{" + labels + f'"{field}": ' + nested(depth) + "}"
    resp = http.post("/api/jobs", data=body, content_type="application/json")
    assert resp.status_code == 400, resp.data[:300]
    assert resp.get_json()["kind"] == "bad_input"
