"""The router worker's glue to the decoder stage (a latent deployment's last step: router/decoding.py
keeps the requests in flight): publish a job's final latent to ddm.decoder, take the decoder's reply,
resend or give up on the sweep. Mixed into RouterWorker (router/worker.py)."""

from __future__ import annotations

import logging
import time

from ddm.router.decoding import Decoding
from ddm.schema.decode_messages import DecodeReply, DecodeRequest
from ddm.schema.errors import SchemaError

log = logging.getLogger("ddm.router")


class DecoderGlue:
    """Uses the worker's settings, names, session, descriptor, decoding stage, _request_props,
    _settle_failed and _finish."""

    def _sweep_decoding(self) -> None:
        """Every sweep: resend a decoding past its timeout; fail a job whose decoder never answered."""
        resend, failed = self.decoding.sweep(time.monotonic())
        for entry in resend:
            log.info("resending the decoding of job %s to %s", entry.job.job_id, self.names.decoder_queue)
            self._publish_decode(entry)
        for entry in failed:
            self._settle_failed(
                entry.job.job_id,
                entry.job.tag,
                f"the decoder (queue {self.names.decoder_queue}) did not answer within "
                f"{self.decoding.give_up_s:g} s: is a `ddm worker decoder` running?",
            )

    def _publish_decode(self, entry: Decoding) -> None:
        request = DecodeRequest(entry.job.job_id, entry.request_id, entry.job.x.astype("float32"))
        body = request.encode(max_bytes=self.settings.max_message_bytes)
        props = self._request_props(entry.request_id, DecodeRequest.TYPE)
        self._session.channel.basic_publish("", self.names.decoder_queue, body, props)

    def _on_decoded(self, body: bytes) -> None:
        try:
            reply = DecodeReply.decode(body, max_bytes=self.settings.max_message_bytes)
        except SchemaError as exc:
            log.warning("dropping an undecodable decoder reply: %s", exc)
            return
        entry = self.decoding.answered(reply.request_id)
        if entry is None:
            return  # a duplicate (a resent request answered twice) or a job no longer ours
        try:
            reply.check_space(self.descriptor.decoder.pixel_space, entry.job.x.shape[0])
        except SchemaError as exc:  # a decoder of another deployment on this queue: say so, do not store it
            self._settle_failed(entry.job.job_id, entry.job.tag, f"the decoder's reply: {exc}")
            return
        self._finish(entry.job, reply.images)
