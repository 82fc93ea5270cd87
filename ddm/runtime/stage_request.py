"""What every stage (expert, decoder) checks in a request's AMQP properties before it decodes the body."""

from __future__ import annotations

from ddm.schema.errors import SchemaError, expected
from ddm.schema.topology import CONTENT_TYPE

# RabbitMQ's direct reply-to namespace. Our requesters each consume an exclusive queue of their own
# (docs/PROTOCOL.md), so no request of ours answers there; and a reply published to a forged address in
# it makes the broker close the REPLIER's whole connection (541 INTERNAL_ERROR, checked on RabbitMQ 3.x
# here): one message would make a stage reconnect forever, taking every request it held with it.
DIRECT_REPLY_TO = "amq.rabbitmq.reply-to"


def check_request_properties(props) -> None:
    """SchemaError naming what was expected when a request cannot be answered as our protocol answers."""
    if not props.reply_to:
        raise SchemaError(expected("a reply_to property naming the requester's queue", props.reply_to))
    if props.reply_to.startswith(DIRECT_REPLY_TO):
        raise SchemaError(
            expected("reply_to naming the requester's own queue, not direct reply-to", props.reply_to[:80])
        )
    if props.content_type not in (None, CONTENT_TYPE):
        raise SchemaError(expected(f"content_type {CONTENT_TYPE!r}", props.content_type))
