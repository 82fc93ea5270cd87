"""An OpenAI images request (`POST /v1/images/generations`) -> the web UI's job form, and the OpenAI
error object every refusal of the endpoint is answered with.

    req = images_request(body, descriptor)       # OpenAIError(400 / 404) saying what is wrong
    state.jobs.submit(req.form, address, token, **req.queue)

The form is the page's (webui/jobs.py parse_form checks it, one home for every job rule): `prompt` is a
class name or label number on a class deployment (or "unconditional"), the text prompt on a text
deployment; `n` is the form's n_per_label, and the extras `seed`, `steps`, `strategy`, `solver`, `grid`,
`guidance_scale` (the form's guidance) and `negative_prompt` are the form's fields. `priority` and
`deadline` (seconds) are Client.submit's, checked there. OpenAI's own fields that change nothing here
(`user`, `safety_identifier`) are accepted and ignored; those that would ask for something this server
cannot do (another output format, quality, style, ...) are refused unless left at their default.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ddm.schema.descriptor import UNCONDITIONAL, DeploymentDescriptor
from ddm.schema.errors import expected
from ddm.webui.jobs import KIND_STATUS, SubmitError, prompted

OPENAI_KEYS = ("model", "prompt", "n", "size", "response_format", "stream", "partial_images")
EXTRAS = ("seed", "steps", "strategy", "solver", "grid", "guidance_scale", "negative_prompt")
QUEUE_EXTRAS = {"priority": "priority", "deadline": "deadline_s"}  # Client.submit's keyword
IGNORED = ("user", "safety_identifier")  # OpenAI's abuse-monitoring identifiers: nothing here reads them
# OpenAI fields this server can only take at their default (None is always the default)
DEFAULT_ONLY = {
    "output_format": ("png",),
    "quality": ("auto",),
    "background": ("auto", "opaque"),
    "moderation": ("auto",),
    "style": (),
    "output_compression": (),
}
KEYS = (*OPENAI_KEYS, *EXTRAS, *QUEUE_EXTRAS, *IGNORED, *DEFAULT_ONLY)
RESPONSE_FORMATS = ("b64_json", "url")
MAX_PARTIAL_IMAGES = 3  # OpenAI's range: 0..3

# the OpenAI error type of each HTTP status this endpoint answers with
ERROR_TYPES = {401: "invalid_request_error", 429: "rate_limit_error"}


class OpenAIError(Exception):
    """A refusal in OpenAI's shape: {"error": {"message", "type", "param", "code"}} with `status`."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.retry_after_s: float | None = None

    @property
    def type(self) -> str:
        if self.status in ERROR_TYPES:
            return ERROR_TYPES[self.status]
        return "server_error" if self.status >= 500 else "invalid_request_error"

    def to_dict(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    @classmethod
    def from_submit(cls, exc: SubmitError) -> OpenAIError:
        """The UI's refusal (bad_input 400, unauthorized 401, rate_limited 429, no_deployment / no_worker /
        unavailable 503) with its words, its kind as the code (401: OpenAI's invalid_api_key)."""
        code = "invalid_api_key" if exc.kind == "unauthorized" else exc.kind
        out = cls(KIND_STATUS[exc.kind], exc.message, code=code)
        out.retry_after_s = exc.retry_after_s
        return out


def bad(param: str, message: str) -> OpenAIError:
    return OpenAIError(400, f"{param}: {message}", param=param, code="invalid_value")


@dataclasses.dataclass(frozen=True)
class ImagesRequest:
    form: dict[str, Any]  # the page's job form (parse_form)
    queue: dict[str, Any]  # Client.submit's priority and deadline_s
    stream: bool
    partial_images: int
    response_format: str  # b64_json or url
    size: str  # the deployment's images, WIDTHxHEIGHT


def image_size(descriptor: DeploymentDescriptor) -> str:
    """The one size a deployment makes, as OpenAI writes sizes: WIDTHxHEIGHT of its finished images."""
    _, h, w = descriptor.image_space.shape
    return f"{w}x{h}"


def images_request(data: object, descriptor: DeploymentDescriptor) -> ImagesRequest:
    """The request body -> ImagesRequest for the serving `descriptor`, or OpenAIError: 404 for another
    model, 400 for anything else this server cannot do (what the form checks is parse_form's to say)."""
    if not isinstance(data, dict):
        raise OpenAIError(400, expected("a JSON object with the request's fields", type(data).__name__))
    unknown = sorted(set(map(str, data)) - set(KEYS))
    if unknown:
        raise OpenAIError(
            400,
            expected(f"only the fields {list(KEYS)}", unknown),
            param=unknown[0],
            code="unknown_parameter",
        )
    model = data.get("model")
    if model is not None and model != descriptor.name:
        raise OpenAIError(
            404,
            f"the model {model!r} is not served here: this server serves {descriptor.name!r} "
            "(GET /v1/models)",
            param="model",
            code="model_not_found",
        )
    _defaults_only(data)
    size = image_size(descriptor)
    if data.get("size") not in (None, "auto", size):
        what = f"{size!r} or 'auto': {descriptor.name} makes {descriptor.image_space.describe()} images only"
        raise bad("size", expected(what, data["size"]))
    response_format = data.get("response_format") or "b64_json"
    if response_format not in RESPONSE_FORMATS:
        raise bad("response_format", expected(f"one of {list(RESPONSE_FORMATS)}", response_format))
    stream = data.get("stream") or False
    if not isinstance(stream, bool):
        raise bad("stream", expected("true or false", stream))
    partial = data.get("partial_images") or 0
    if isinstance(partial, bool) or not isinstance(partial, int) or not 0 <= partial <= MAX_PARTIAL_IMAGES:
        raise bad("partial_images", expected(f"an integer 0..{MAX_PARTIAL_IMAGES}", partial))
    form = {k: data[k] for k in ("seed", "steps", "strategy", "solver", "grid") if k in data}
    form["guidance"] = data.get("guidance_scale")
    form["n_per_label"] = data.get("n", 1)
    form.update(_condition(data, descriptor))
    queue = {arg: data[key] for key, arg in QUEUE_EXTRAS.items() if data.get(key) is not None}
    return ImagesRequest(form, queue, stream, partial, response_format, size)


def _defaults_only(data: dict) -> None:
    for key, allowed in DEFAULT_ONLY.items():
        if data.get(key) is not None and data[key] not in allowed:
            what = f"{' or '.join(map(repr, allowed))} (or leave it out)" if allowed else "the field left out"
            raise bad(key, expected(what, data[key]) + ": this server makes PNG images only")


def _condition(data: dict, descriptor: DeploymentDescriptor) -> dict[str, Any]:
    """The form's conditioning: a text deployment's prompt and negative prompt, or a class label."""
    prompt, negative = data.get("prompt"), data.get("negative_prompt")
    if not isinstance(prompt, str):
        raise bad("prompt", expected("a string", prompt))
    if prompted(descriptor):
        return {"prompt": prompt, "negative_prompt": negative}
    if negative is not None:
        words = descriptor.conditioning.describe()
        raise bad("negative_prompt", f"expected none: {descriptor.name} reads no prompt ({words})")
    return {"labels": [_label(prompt, descriptor)]}


def _label(prompt: str, descriptor: DeploymentDescriptor) -> int | None:
    """A class deployment's prompt: a class name (any case), a label number (parse_form checks its
    range), or 'unconditional' (also an empty prompt, on a deployment without classes)."""
    space = descriptor.sample_space
    text = prompt.strip().lower()
    if text == UNCONDITIONAL or (not text and not space.conditional):
        return None  # an unconditional image
    names = [name.lower() for name in space.class_names]
    if text in names:
        return names.index(text)
    if text.isascii() and text.isdigit() and len(text) < 6:
        return int(text)
    shown = ", ".join(space.class_names[:10]) + (", ..." if space.num_classes > 10 else "")
    what = f"a class name ({shown}) or label 0..{space.num_classes - 1}, or {UNCONDITIONAL!r}"
    if not space.conditional:
        what = f"{UNCONDITIONAL!r} or an empty prompt: {descriptor.name} has no classes"
    raise bad("prompt", expected(what, prompt))
