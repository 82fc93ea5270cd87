"""`ddm worker decoder`: serve a latent deployment's decoder from `ddm.decoder`.

The decoder stage sits on an accelerator host like an expert: it consumes DecodeRequests (a finished
job's latents) and replies with pixels. Built on the consumer runtime like the expert worker (connection,
reconnects, heartbeat, dead letters, metrics, stop). A request is decoded in its delivery callback (a
job's n <= 64 latents: milliseconds) and acked only after its reply was published, so a decoder killed
mid-request leaves it unacked and the broker redelivers it to another replica (or to this one when it
is back); decoding is a pure function, so serving it twice is harmless. Latents of another shape than
the decoder's, or beyond the declared magnitude, are dead-lettered with the reason, and so is a request
whose pixels come out non-finite ("reply refused"). A redelivered request is counted by the crash-loop
guard first (ddm/runtime/crash_guard.py): one that keeps killing decoders is dead-lettered, not served.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import time
from pathlib import Path

from ddm.runtime.consumer import MAX_WAIT_S, ConsumerRuntime, Session
from ddm.runtime.stage_request import check_request_properties
from ddm.schema.decode_messages import DecodeReply, DecodeRequest
from ddm.schema.deployment import Deployment
from ddm.schema.errors import ConfigError, expected
from ddm.schema.names import check_worker_id
from ddm.schema.settings import Settings, redact
from ddm.workers.metrics import ExpertMetrics
from ddm.workers.stats import WorkerStats

log = logging.getLogger(__name__)


class DecoderWorker:
    """Consume `<prefix>ddm.decoder`, decode, reply, ack. run() blocks until stop()."""

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
        self.settings = settings
        self.names = settings.names
        deployment = Deployment.load(deployment_path)
        if deployment.decoder is None:
            raise ConfigError(expected(f"a [decoder] table in {deployment.path}", "a deployment without one"))
        self.checkpoint = deployment.decoder.checkpoint
        self.device = device or deployment.decoder.device
        host = socket.gethostname()[:60] or "host"
        self.worker_id = check_worker_id(worker_id or f"decoder-{host}-{os.getpid()}")
        self.queue = self.names.decoder_queue
        self.decoder = decoder
        self.stats = WorkerStats()
        self.metrics = ExpertMetrics("decoder", self.worker_id, role="decoder")  # the expert families
        self._session: Session | None = None
        self.runtime = ConsumerRuntime(
            settings, self.worker_id, self, self.metrics, metrics_port=metrics_port, hooks=hooks
        )

    @property
    def ready(self):
        return self.runtime.ready

    @property
    def stopping(self) -> bool:
        return self.runtime.stopping

    def run(self) -> None:
        try:
            self.runtime.run()
        finally:
            log.info("decoder worker %s stopped; %s", self.worker_id, self.stats.summary())

    def stop(self) -> None:
        self.runtime.stop()

    # ------------------------------------------------------------ the runtime's handler

    def start(self) -> None:
        if self.decoder is None:
            from ddm.workers.autoencoder.checkpoint import load_autoencoder

            self.decoder = load_autoencoder(self.checkpoint, self.device)
        card = self.decoder.card
        log.info(
            "decoder worker %s: %s -> %s from %s; queue %s at %s",
            self.worker_id,
            card.describe_latent(),
            card.pixel_space.describe(),
            self.checkpoint,
            self.queue,
            redact(self.settings.amqp_url),
        )

    def attach(self, session: Session) -> None:
        session.declare(jobs=False, decoder=True)
        session.channel.basic_qos(prefetch_count=4)
        session.consume(self.queue, self._on_message)  # its queue's depth: the routers export it
        self._session = session

    def detach(self, session: Session, lost: bool) -> int:
        self._session = None
        if not lost:
            session.cancel_consumers()
        return 0  # every delivery is answered in its callback: nothing waits here

    def wait_s(self) -> float:
        return MAX_WAIT_S

    def pump(self) -> None:
        pass

    def beat_static(self) -> dict[str, object]:
        return {
            "role": "decoder",
            "device": getattr(self.decoder, "device", self.device),  # resolved once loaded (auto -> cpu)
            "host": socket.gethostname(),
            "region": self.settings.region,
            "pid": os.getpid(),
            "queue": self.queue,
        }

    def beat_extra(self) -> dict[str, object]:
        return {}

    def count_refused(self, queue: str) -> None:
        self.stats.dead_lettered += 1
        self.metrics.dead_lettered.inc()

    # ------------------------------------------------------------ consuming

    def _on_message(self, ch, method, props, body: bytes) -> None:
        arrived = time.monotonic()
        try:
            request = self._request(props, body)
        except Exception as exc:  # SchemaError, or anything a malformed body could raise
            self._refuse(method.delivery_tag, props, body, f"{type(exc).__name__}: {exc}")
            return
        if method.redelivered and not self._session.check_redelivered(
            method.delivery_tag, props, body, self.queue
        ):
            return  # it kept killing decoders: dead-lettered with the last error (crash_guard.py)
        start = time.perf_counter()
        try:
            images = self.decoder.decode(request.z)
            compute_ms = (time.perf_counter() - start) * 1e3
            reply = DecodeReply(request.job_id, request.request_id, images, self.worker_id, compute_ms)
            encoded = reply.encode(max_bytes=self.settings.max_message_bytes)
        except Exception as exc:  # non-finite pixels, a reply too large: refused with the reason, once
            self._refuse(method.delivery_tag, props, body, f"reply refused: {type(exc).__name__}: {exc}")
            return
        self._session.reply(method.delivery_tag, props, encoded, DecodeReply.TYPE)
        self.stats.record_batch(len(images), 1, compute_ms)
        self.metrics.record_batch(len(images), compute_ms, [time.monotonic() - arrived])

    def _request(self, props, body: bytes) -> DecodeRequest:
        """The request in a delivery, checked (SchemaError naming what was expected)."""
        check_request_properties(props)
        request = DecodeRequest.decode(body, max_bytes=self.settings.max_message_bytes)
        request.check_space(self.decoder.card.latent_space())  # another shape: dead-lettered, said why
        return request

    def _refuse(self, delivery_tag: int, props, body: bytes, reason: str) -> None:
        self._session.dead_letter(delivery_tag, props, body, reason, self.queue)
        self.count_refused(self.queue)


def run_from_args(args) -> int:
    """Entry of `ddm worker decoder` (flags in ddm.ops.cli.worker)."""
    from ddm.schema.deployment import resolve_deployment

    worker = DecoderWorker(
        Settings.from_env(),
        resolve_deployment(args.deployment),
        device=args.device,
        worker_id=args.worker_id,
        metrics_port=args.metrics_port,
    )
    signal.signal(signal.SIGTERM, lambda *_: worker.stop())
    signal.signal(signal.SIGINT, lambda *_: worker.stop())
    worker.run()
    return 0
