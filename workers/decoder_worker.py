"""`ddm worker decoder`: serve a latent deployment's decoder from `ddm.decoder`.

The decoder stage sits on an accelerator host like an expert: it consumes DecodeRequests (a finished
job's latents) and replies with pixels. A stage on the stage base (ddm/runtime/stage.py), which owns the
request/reply shell: properties and decode checks, dead letters with the reason, the crash-loop guard,
reply then ack. A request is decoded in its delivery callback (a job's n <= 64 latents: milliseconds)
and acked only after its reply was published, so a decoder killed mid-request leaves it unacked and the
broker redelivers it to another replica (or to this one when it is back); decoding is a pure function,
so serving it twice is harmless. Latents of another shape than the decoder's, or beyond the declared
magnitude, are dead-lettered with the reason, and so is a request whose pixels come out non-finite
("reply refused").
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from ddm.runtime.signals import serve_from_args
from ddm.runtime.stage import Delivery, Stage
from ddm.schema.decode_messages import DecodeReply, DecodeRequest
from ddm.schema.deployment import Deployment
from ddm.schema.errors import ConfigError, expected
from ddm.schema.names import check_worker_id
from ddm.schema.settings import Settings, redact
from ddm.workers.metrics import ExpertMetrics
from ddm.workers.stats import WorkerStats


class DecoderWorker(Stage):
    """Consume `<prefix>ddm.decoder`, decode, reply, ack. run() blocks until stop()."""

    REQUEST = DecodeRequest
    role = "decoder"

    def __init__(
        self,
        settings: Settings,
        deployment_path: str | Path,
        *,
        device: str | None = None,
        worker_id: str | None = None,
        decoder=None,
        metrics_port: int | None = None,
        hooks=(),
    ):
        deployment = Deployment.load(deployment_path)
        if deployment.decoder is None:
            raise ConfigError(expected(f"a [decoder] table in {deployment.path}", "a deployment without one"))
        self.checkpoint = deployment.decoder.checkpoint
        self.device = device or deployment.decoder.device
        self.decoder = decoder
        host = socket.gethostname()[:60] or "host"
        worker_id = check_worker_id(worker_id or f"decoder-{host}-{os.getpid()}")
        metrics = ExpertMetrics("decoder", worker_id, role="decoder")  # the expert families
        queue = settings.names.decoder_queue  # its depth: the routers export it
        super().__init__(
            settings, worker_id, queue, WorkerStats(), metrics, metrics_port=metrics_port, hooks=hooks
        )

    def load(self) -> None:
        if self.decoder is None:
            from ddm.workers.autoencoder.checkpoint import load_autoencoder

            self.decoder = load_autoencoder(self.checkpoint, self.device)
        card = self.decoder.card
        self.log_start(
            f"{card.describe_latent()} -> {card.pixel_space.describe()} from {self.checkpoint}; "
            f"queue {self.queue} at {redact(self.settings.amqp_url)}"
        )

    def declare(self, session) -> None:
        session.declare(jobs=False, decoder=True)

    def check(self, request: DecodeRequest) -> None:
        request.check_space(self.decoder.card.latent_space())  # another shape: dead-lettered, said why

    def answer(self, delivery: Delivery) -> None:
        request = delivery.request
        start = time.perf_counter()
        try:
            images = self.decoder.decode(request.z)
            compute_ms = (time.perf_counter() - start) * 1e3
            reply = DecodeReply(request.job_id, request.request_id, images, self.worker_id, compute_ms)
            encoded = reply.encode(max_bytes=self.settings.max_message_bytes)
        except Exception as exc:  # non-finite pixels, a reply too large: refused with the reason, once
            reason = f"reply refused: {type(exc).__name__}: {exc}"
            self.refuse(delivery.delivery_tag, delivery.properties, delivery.body, reason)
            return
        # counted before the reply goes out, so its client finds it counted
        self.stats.record_batch(len(images), 1, compute_ms)
        self.metrics.record_batch(len(images), compute_ms, [time.monotonic() - delivery.arrived])
        self.reply(delivery, encoded, DecodeReply.TYPE)

    def beat_fields(self) -> dict[str, object]:
        return {"device": getattr(self.decoder, "device", self.device)}  # resolved once loaded (auto -> cpu)


def run_from_args(args) -> int:
    """Entry of `ddm worker decoder` (flags in ddm.ops.cli.worker)."""
    return serve_from_args(DecoderWorker, args, device=args.device)
