"""A text deployment's jobs through the web UI (issue 37 parts 10 and 11), on the real Redis and RabbitMQ
with a fake cluster: the form takes a prompt and a negative prompt instead of labels, checked by the
schema's one rule (check_prompt); a prompt too long, not valid Unicode or with control characters, labels
on a text deployment and a prompt on a class deployment are refused with a 4xx that says what was
expected, and so is a body past the UI's cap (which every legal job fits under); the page draws a
prompt box with the deployment's example prompts instead of the label chips; a job's prompt reaches the
job view and the Recent jobs list."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ddm.schema.conditioning import MAX_PROMPT_CHARS, Conditioning, TextEncoderSpec
from ddm.schema.descriptor import ExpertInfo
from ddm.schema.sample_space import SampleSpace
from ddm.schema.strategy import accepted_strategies
from ddm.webui.jobs import FORM_KEYS, SubmitError, deployment_payload, parse_form
from tests.support.descriptors import demo_descriptor

EXAMPLES = ("a red heart", 'a "smiling" face', "a cat 🐱 on a\nmat")
ENCODER = TextEncoderSpec(
    "sentence-transformers/all-MiniLM-L6-v2", "ab" * 32, "wordpiece", 128, 384, "pooled"
)


def text_descriptor(**changes):
    """Two experts conditioned on prompts (no classes: every label is the null label 0), mixed by the
    label-prior router's data share, with example prompts; `changes` replace any field."""
    fields = dict(
        router_kind="label-prior",
        experts=(ExpertInfo(0, "torch", "cpu", (), "random"), ExpertInfo(1, "jax", "cpu", (), "random")),
        strategies=accepted_strategies(2, has_oracle=False),
        default_strategy="full",
        class_names=(),
        sample_space=SampleSpace((3, 16, 16), (-1.0, 1.0)),
        conditioning=Conditioning("text", ENCODER),
        example_prompts=EXAMPLES,
    )
    return dataclasses.replace(demo_descriptor(), **(fields | changes))


# ---------------------------------------------------------------- the form


def test_a_text_job_is_its_prompt_n_times_with_no_labels():
    d = text_descriptor()
    spec = parse_form({"prompt": "a red apple", "n_per_label": 3, "steps": 8, "seed": 5}, d)
    assert spec.labels == (None, None, None) and spec.prompt == "a red apple" and spec.negative_prompt is None
    both = parse_form({"labels": None, "prompt": "a cat\tin a\nhat", "negative_prompt": "blurry"}, d)
    assert both.labels == (None,) and both.prompt == "a cat\tin a\nhat" and both.negative_prompt == "blurry"
    assert parse_form({}, d).prompt is None  # no prompt: the empty prompt, an unconditional image
    assert {"prompt", "negative_prompt"} <= FORM_KEYS
    d.check(spec)  # what the descriptor serves


@pytest.mark.parametrize(
    "form, words",
    [
        ({"prompt": "x" * 100_000}, f"prompt of at most {MAX_PROMPT_CHARS} characters, got '100000'"),
        ({"prompt": "x" * (MAX_PROMPT_CHARS + 1)}, f"at most {MAX_PROMPT_CHARS} characters"),
        ({"prompt": "a", "negative_prompt": "n" * 5000}, f"negative_prompt of at most {MAX_PROMPT_CHARS}"),
        ({"prompt": "bad \ud800 half"}, "prompt of valid Unicode text"),
        ({"prompt": "a bell\x07"}, "prompt without control characters, got 'U+0007 at 6'"),
        ({"prompt": "nul\x00"}, "without control characters"),
        ({"prompt": 5}, "prompt as text, got 'int'"),
        ({"prompt": ["a"]}, "prompt as text, got 'list'"),
        ({"negative_prompt": "red"}, "a prompt with the negative prompt"),
        ({"labels": "all", "prompt": "a"}, "labels: expected none (leave them out and send a prompt)"),
        ({"labels": [], "prompt": "a"}, "labels: expected none"),
        ({"prompt": "a", "colour": "red"}, "only the fields"),
    ],
)
def test_bad_prompts_are_refused_saying_what_was_expected(form, words):
    with pytest.raises(SubmitError) as info:
        parse_form(form, text_descriptor())
    assert info.value.kind == "bad_input" and info.value.http_status == 400
    assert words in info.value.message, info.value.message


def test_the_page_gets_the_conditioning_the_examples_and_the_limit():
    text = deployment_payload(text_descriptor())
    assert text["conditioning_kind"] == "text" and text["example_prompts"] == list(EXAMPLES)
    assert text["max_prompt_chars"] == MAX_PROMPT_CHARS and text["class_names"] == []
    assert text["conditioning_text"].startswith("prompts (sentence-transformers/all-MiniLM-L6-v2")
    assert (text["null_label"], text["unconditional_strategy"]) == (0, "full")
    assert [e["trained_on"] for e in text["experts"]] == ["captioned images"] * 2  # no labels to name
    plain = deployment_payload(demo_descriptor())
    assert plain["conditioning_kind"] == "class" and plain["example_prompts"] == []


# ---------------------------------------------------------------- the API, on the real services


@pytest.fixture
def text_app(make_app, fake):
    """The UI with a text deployment served (its router and both experts beating)."""
    app = make_app(deployment=None)
    fake.store.publish_descriptor(text_descriptor(), 60)
    fake.all_workers()
    return app


def test_a_prompt_job_is_queued_and_its_prompt_reaches_the_job_and_the_recent_list(text_app):
    http = text_app.test_client()
    form = {"prompt": "a <b>bold</b> & 'quoted' heart", "negative_prompt": "blurry", "n_per_label": 2}
    ok = http.post("/api/jobs", json={**form, "steps": 4})
    assert ok.status_code == 201, ok.get_json()
    job_id = ok.get_json()["job_id"]
    assert ok.get_json()["spec"]["prompt"] == form["prompt"]
    job = http.get(f"/api/jobs/{job_id}").get_json()
    assert (job["prompt"], job["negative_prompt"], job["labels"]) == (form["prompt"], "blurry", [None, None])
    recent = {j["job_id"]: j for j in http.get("/api/jobs").get_json()["jobs"]}
    assert recent[job_id]["prompt"] == form["prompt"]


def test_the_api_answers_4xx_naming_the_rule(text_app, make_app, fake, fake_deployment):
    http = text_app.test_client()

    def refused(body, status=400, **kw):
        r = http.post("/api/jobs", data=body, content_type="application/json", **kw)
        assert r.status_code == status, (r.status_code, r.get_data(as_text=True)[:300])
        assert r.get_json()["kind"] == "bad_input"
        return r.get_json()["error"]

    # a 100 kB prompt: over the body cap, and the answer names the cap and the prompt's limit
    cap = text_app.config["MAX_CONTENT_LENGTH"]
    body = json.dumps({"prompt": "x" * 100_000})
    error = refused(body, 413)
    assert f"at most {cap} bytes" in error and f"a prompt is at most {MAX_PROMPT_CHARS} characters" in error
    assert f"got '{len(body)} bytes'" in error  # what arrived
    # under the cap but over the prompt's limit: the schema's words
    assert f"at most {MAX_PROMPT_CHARS} characters" in refused(json.dumps({"prompt": "x" * 10_000}))
    assert "expected JSON in UTF-8" in refused(b'{"prompt": "caf\xe9"}')  # Latin-1, not UTF-8
    assert "valid Unicode text" in refused(json.dumps({"prompt": "half \ud800"}))
    assert "without control characters" in refused(json.dumps({"prompt": "esc \x1b[31m"}))
    # labels on a text deployment: the descriptor's refusal, as a 400 (not a 500)
    error = refused(json.dumps({"labels": [3], "prompt": "a"}))
    assert "not class labels: expected a prompt, and no labels, got [3]" in error

    # a prompt on a class deployment: likewise the descriptor's words
    fake.publish(fake_deployment)
    error = refused(json.dumps({"labels": [1], "prompt": "a red apple"}))
    assert "conditioned on class labels, not prompts" in error


def test_every_legal_job_fits_under_the_body_cap(text_app):
    """The largest legal prompts (MAX_PROMPT_CHARS characters outside the BMP, each 12 bytes of JSON
    escapes as Python's json writes them) and the other fields fit under the UI's body cap: the cap
    never refuses a job the schema accepts."""
    worst = "🐱" * MAX_PROMPT_CHARS
    body = json.dumps({"prompt": worst, "negative_prompt": worst, "n_per_label": 1, "steps": 4})
    assert len(body) < text_app.config["MAX_CONTENT_LENGTH"]
    r = text_app.test_client().post("/api/jobs", data=body, content_type="application/json")
    assert r.status_code == 201, r.get_json()
    assert r.get_json()["spec"]["prompt"] == worst


def test_a_socket_submit_of_a_bad_prompt_is_answered_not_dropped(text_app):
    sio = text_app.extensions["socketio"].test_client(text_app, flask_test_client=text_app.test_client())
    answer = sio.emit("submit", {"prompt": "x" * (MAX_PROMPT_CHARS + 1)}, callback=True)
    assert answer["ok"] is False and answer["kind"] == "bad_input"
    assert f"at most {MAX_PROMPT_CHARS} characters" in answer["error"]
    sio.disconnect()


# ---------------------------------------------------------------- the page


def test_the_page_draws_a_prompt_box_for_a_text_deployment_and_chips_for_a_class_one(
    text_app, make_app, fake, fake_deployment
):
    html = text_app.test_client().get("/").get_data(as_text=True)
    assert 'id="prompt-field">' in html and 'id="labels-field" hidden>' in html
    assert f'maxlength="{MAX_PROMPT_CHARS}"' in html and ">Images\n" in html
    fake.publish(fake_deployment)
    html = text_app.test_client().get("/").get_data(as_text=True)
    assert 'id="prompt-field" hidden>' in html and 'id="labels-field">' in html
    assert html.count('name="label"') == 10 and ">Images per label\n" in html
