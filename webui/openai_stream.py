"""The OpenAI endpoint's pictures: a job's images as PNGs, one per image, and the image-generation stream
events (OpenAI's `image_generation.partial_image` and `image_generation.completed`) as server-sent events.

Pixels are the page's: a finished job's images through webui/pixels.py to_pixels from the value range
its pictures are in, a partial image from the job's frame exactly as the page draws it
(TailHub.frame_payload: the sample space's range, a latent deployment's linear preview), each image at
the deployment's own size (scale 1).

Partial images come at evenly spaced steps: N partials of an S-step job at the steps round(k S / (N+1)),
k = 1..N, those between 1 and S-1 (a job of few steps gets fewer). Each step sends one partial event
per image of the job (`image_index`, an extra field, says which; `partial_image_index` counts the steps
sent, from 0); after the last step one completed event per image, in order.
"""

from __future__ import annotations

import base64
import io
import json
import time
from collections.abc import Iterator

import numpy as np

from ddm.webui.pixels import to_pixels

PARTIAL = "image_generation.partial_image"
COMPLETED = "image_generation.completed"
USAGE = {"input_tokens": 0, "input_tokens_details": {"image_tokens": 0, "text_tokens": 0}}
USAGE |= {"output_tokens": 0, "total_tokens": 0}  # OpenAI's usage counts tokens: none here


def pngs(pixels: np.ndarray) -> list[bytes]:
    """uint8 [n, H, W] (greyscale) or [n, H, W, 3] (RGB) -> one PNG per image."""
    from PIL import Image

    out = []
    for img in pixels:
        buf = io.BytesIO()
        Image.fromarray(img, mode="RGB" if img.ndim == 3 else "L").save(buf, format="PNG")
        out.append(buf.getvalue())
    return out


def result_pngs(x: np.ndarray, value_range: tuple[float, float]) -> list[bytes]:
    """A finished job's images float [n, C, H, W] -> one PNG each (as the page draws them)."""
    return pngs(to_pixels(x, value_range)[0])


def frame_pngs(payload: dict) -> list[bytes]:
    """A frame as the page gets it (TailHub.frame_payload) -> one PNG per image."""
    _, h, w = payload["shape"]
    pixels = np.frombuffer(base64.b64decode(payload["pixels"]), np.uint8)
    extra = (3,) if payload["channels"] == 3 else ()
    return pngs(pixels.reshape(payload["n"], h, w, *extra))


def partial_steps(steps: int, partial_images: int) -> list[int]:
    """The steps whose frames become partial images: evenly spaced, strictly inside 1..steps-1."""
    chosen = {round(k * steps / (partial_images + 1)) for k in range(1, partial_images + 1)}
    return sorted(s for s in chosen if 1 <= s < steps)


def b64(png: bytes) -> str:
    return base64.b64encode(png).decode("ascii")


def event(kind: str, data: dict) -> str:
    """One server-sent event: `event: KIND` and its JSON on one `data:` line."""
    return f"event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


def image_event(kind: str, png: bytes, size: str, image_index: int, partial_index: int | None = None) -> str:
    data = {
        "type": kind,
        "b64_json": b64(png),
        "created_at": int(time.time()),
        "size": size,
        "quality": "auto",
        "background": "opaque",
        "output_format": "png",
        "image_index": image_index,
    }
    if partial_index is not None:
        data["partial_image_index"] = partial_index
    else:
        data["usage"] = USAGE
    return event(kind, data)


def partial_events(payloads: Iterator[dict], steps: list[int], size: str) -> Iterator[str]:
    """Frame payloads in step order -> the partial image events of the chosen `steps`."""
    wanted = set(steps)
    sent = 0
    for payload in payloads:
        if payload["step"] not in wanted:
            continue
        for i, png in enumerate(frame_pngs(payload)):
            yield image_event(PARTIAL, png, size, i, sent)
        sent += 1
