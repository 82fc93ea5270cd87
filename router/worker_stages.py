"""The router worker's glue to the stages beside the experts (router/stage_calls.py keeps the calls in
flight): a text job's prompts go to `ddm.text` before its first step, and their embeddings to Redis,
where the experts read them; a latent job's final latents go to `ddm.decoder`, and its pixels end it.
Resend or give up on the sweep. Mixed into RouterWorker (router/worker.py)."""

from __future__ import annotations

import logging
import time

import numpy as np

from ddm.router.jobrun import JobRun
from ddm.router.stage_calls import StageCall
from ddm.runtime.redis_conn import REDIS_CONNECTION_ERRORS
from ddm.schema.decode_messages import DecodeReply, DecodeRequest
from ddm.schema.errors import SchemaError
from ddm.schema.text_messages import EncodeReply, EncodeRequest

log = logging.getLogger("ddm.router")

STAGES = {  # kind -> (the `ddm worker` that serves it, its queue's Names member)
    "decode": ("ddm worker decoder", "decoder_queue"),
    "encode": ("ddm worker text-encoder", "text_queue"),
}


class StageGlue:
    """Uses the worker's settings, names, session, descriptor, stage_calls, embeddings, scheduler,
    waiting, _request_props, _carry_out, _settle_failed and _finish. A Redis outage while a job is
    between a stage and the scheduler puts its delivery back with the held ones before the worker
    pauses (router/worker_outage.py), so it is resumed, not forgotten."""

    # ------------------------------------------------------------ both stages

    def _sweep_stage_calls(self) -> None:
        """Every sweep: resend a call past its timeout; fail a job whose stage never answered."""
        resend, failed = self.stage_calls.sweep(time.monotonic())
        for entry in resend:
            log.info("resending the %s call of job %s", entry.kind, entry.job.job_id)
            self._publish_call(entry)
        for entry in failed:
            command, member = STAGES[entry.kind]
            self._settle_failed(
                entry.job.job_id,
                entry.job.tag,
                f"the {entry.kind} stage (queue {getattr(self.names, member)}) did not answer within "
                f"{self.stage_calls.give_up_s:g} s: is a `{command}` running?",
            )

    def _publish_call(self, entry: StageCall) -> None:
        job = entry.job
        if entry.kind == "decode":
            request = DecodeRequest(job.job_id, entry.request_id, job.x.astype("float32"))
        else:
            request = EncodeRequest(job.job_id, entry.request_id, job.arrays.job.prompts)
        body = request.encode(max_bytes=self.settings.max_message_bytes)
        props = self._request_props(entry.request_id, request.TYPE)
        self._session.channel.basic_publish("", getattr(self.names, STAGES[entry.kind][1]), body, props)

    def _on_stage_reply(self, kind: str, body: bytes) -> None:
        reply_type = DecodeReply if kind == DecodeReply.TYPE else EncodeReply
        try:
            reply = reply_type.decode(body, max_bytes=self.settings.max_message_bytes)
        except SchemaError as exc:
            log.warning("dropping an undecodable %s: %s", reply_type.TYPE, exc)
            return
        entry = self.stage_calls.answered(reply.request_id)
        if entry is None:
            return  # a duplicate (a resent request answered twice) or a job no longer ours
        try:
            if isinstance(reply, DecodeReply):
                reply.check_space(self.descriptor.decoder.pixel_space, entry.job.x.shape[0])
            else:
                reply.check_encoder(self.descriptor.conditioning.text, len(entry.job.arrays.job.prompts))
        except SchemaError as exc:  # a stage of another deployment on this queue: say so, do not store it
            self._settle_failed(entry.job.job_id, entry.job.tag, f"the {entry.kind} stage's reply: {exc}")
            return
        try:
            if isinstance(reply, DecodeReply):
                self._finish(entry.job, reply.images)
            else:
                self._encoded(entry.job, reply)
        except REDIS_CONNECTION_ERRORS:  # the call is settled here, the job not: held, asked again later
            self.waiting.append(entry.job.tag)
            raise

    # ------------------------------------------------------------ the text encoder

    def _start_job(self, job: JobRun) -> None:
        """Run a job; a text job whose prompt embeddings are not stored (a fresh prompt, or Redis lost
        them) asks the text encoder first, and runs when they are."""
        keys = _keys(job)
        if keys and not job.finished and self.embeddings.missing(keys):
            self._publish_call(self.stage_calls.start(job, time.monotonic(), "encode"))
            return
        if keys and not job.finished and self.scheduler.policy.reads_prompts:
            [prompt] = self.embeddings.get(keys[:1])
            if prompt is None:  # expired since it was found: encode it again
                self._publish_call(self.stage_calls.start(job, time.monotonic(), "encode"))
                return
            _route_on_prompt(job, prompt)
        self._carry_out(lambda out: self.scheduler.start(job, out))

    def _encoded(self, job: JobRun, reply: EncodeReply) -> None:
        if any(reply.truncated):
            log.warning(
                "job %s: its prompt was cut to the text encoder's limit of %d tokens",
                job.job_id,
                self.descriptor.conditioning.text.max_tokens,
            )
        self.embeddings.put(_keys(job), reply.embeddings)
        if self.scheduler.policy.reads_prompts:
            _route_on_prompt(job, reply.embeddings[0])
        self._carry_out(lambda out: self.scheduler.start(job, out))

    # ------------------------------------------------------------ the decoder

    def _decode(self, job: JobRun) -> None:
        """A latent job's last step is stored: it is done when its pixels come."""
        self._publish_call(self.stage_calls.start(job, time.monotonic(), "decode"))


def _keys(job: JobRun) -> list[bytes]:
    """A text job's two embedding keys (its prompt's, then the guidance null's); [] for a class job."""
    keys = job.arrays.text_keys
    return [] if keys is None else [bytes(k) for k in np.asarray(keys[0])]


def _route_on_prompt(job: JobRun, prompt: np.ndarray) -> None:
    """A prompt-aware router reads the job's prompt embedding on every row (its images share it)."""
    job.prompt_rows = np.repeat(np.asarray(prompt, np.float32)[None], job.arrays.spec.n, axis=0)
