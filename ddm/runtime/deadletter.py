"""Dead letters with a reason: how a worker refuses a message it cannot serve.

Why publish a copy instead of basic_reject(requeue=False): the work queues' x-dead-letter-exchange
would route a rejected message to ddm.dead as well, but RabbitMQ only adds its own x-death header; it
cannot carry *why* we refused the message. So the worker publishes the original body, with the
original properties plus our reason headers, to the same dead-letter exchange and routing key on a
confirm-mode channel, and acks the original only once the broker confirmed the copy (at-least-once,
like the reject). If that publish is refused it falls back to the plain reject, which still
dead-letters the message, without our reason.

Any AMQP client can read what lands in ddm.dead: the original headers are copied only when they encode
and decode again, else dropped (and said so); properties that never decoded (ddm/runtime/property_guard.py)
are kept as base64 bytes in one header, never as the table that broke the reader.
"""

from __future__ import annotations

import logging

import pika
import pika.exceptions

from ddm.runtime.property_guard import GuardedBasicProperties, raw_header, undecodable
from ddm.schema.names import Names
from ddm.schema.topology import REASON_HEADER, SOURCE_QUEUE_HEADER, WORKER_HEADER

log = logging.getLogger(__name__)

MAX_REASON_CHARS = 2000


def dead_letter(
    channel, confirm_channel, names: Names, delivery_tag: int, props, body: bytes, *, reason, queue, worker_id
) -> None:
    """Move the delivery `delivery_tag` of `channel` to ddm.dead with `reason`, then settle it.

    confirm_channel: a channel of the same connection in confirm mode (publish waits for the broker).
    """
    reason = reason[:MAX_REASON_CHARS]
    headers = {**readable_headers(props.headers), **raw_header(props)}
    headers.update({REASON_HEADER: reason, SOURCE_QUEUE_HEADER: queue, WORKER_HEADER: worker_id})
    copy = pika.BasicProperties(
        content_type=props.content_type,
        content_encoding=props.content_encoding,
        headers=headers,
        delivery_mode=pika.DeliveryMode.Persistent,
        correlation_id=props.correlation_id,
        reply_to=props.reply_to,
        message_id=props.message_id,
        timestamp=props.timestamp,
        type=props.type,
        app_id=props.app_id,
    )
    try:
        # mandatory: a copy the exchange cannot route (ddm.dead deleted) comes back as UnroutableError
        # instead of being confirmed and dropped, so the original is rejected, not acked
        confirm_channel.basic_publish(
            names.dead_letter_exchange, names.dead_letter_queue, body, copy, mandatory=True
        )
    except (pika.exceptions.NackError, pika.exceptions.UnroutableError) as exc:
        log.error("the broker refused a dead letter (%r); rejecting it without our reason", exc)
        channel.basic_reject(delivery_tag, requeue=False)
    else:
        channel.basic_ack(delivery_tag)
    log.warning("dead-lettered a message from %s: %s", queue, reason[:300])


def readable_headers(headers: dict | None) -> dict:
    """`headers` when they survive an encode and decode (what a reader of ddm.dead will do), else a
    note that they were dropped."""
    if not headers:
        return {}
    try:
        encoded = pika.BasicProperties(headers=headers).encode()
        back = GuardedBasicProperties()
        back.decode(b"".join(encoded))
    except Exception as exc:  # noqa: BLE001 - a value pika cannot encode
        return {DROPPED_HEADER: f"{type(exc).__name__}: {exc}"[:300]}
    if undecodable(back) is not None:
        return {DROPPED_HEADER: undecodable(back)[:300]}
    return dict(headers)


DROPPED_HEADER = "x-ddm-headers-dropped"  # why the original headers are not in the dead letter
