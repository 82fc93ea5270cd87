"""A pika-level guard: a message whose AMQP properties pika cannot decode reaches our consumer as a
message to refuse, instead of ending the connection.

Why: pika decodes a content header inside its I/O loop. A header table with a timestamp of 2**63
(`datetime.fromtimestamp` overflows), an unknown field type, or a truncated table raises there, the
connection dies ("lost the broker"), the broker redelivers the same message to the next consumer, and
every worker of the queue loops on it for good (issue 23). The exception cannot be caught around
process_data_events: by then the frame is lost with the connection.

install() swaps pika's properties class for Basic (class id 60, what every delivery carries) for a
subclass whose decode never raises: on failure it keeps the raw bytes and the reason and leaves every
property unset. The runtime's consumer wrapper (Session.consume) dead-letters such a delivery with its
raw body and the reason, and never hands it to a worker's callback. It is idempotent, affects only
decoding (encode is inherited), and is installed by connect() before any of our connections opens.
"""

from __future__ import annotations

import base64

import pika.spec

RAW_PROPERTIES_HEADER = "x-ddm-raw-properties"  # base64 of the properties that did not decode
MAX_RAW_BYTES = 4096  # what a dead letter keeps of them


class GuardedBasicProperties(pika.spec.BasicProperties):
    """BasicProperties whose decode never raises. `undecodable` says why it failed (None: it did not),
    `raw` holds the encoded properties then."""

    undecodable: str | None = None
    raw: bytes = b""

    def decode(self, encoded, offset=0):
        try:
            return super().decode(encoded, offset)
        except Exception as exc:  # noqa: BLE001 - any failure here would end the connection
            clean = pika.spec.BasicProperties()
            self.__dict__.update(clean.__dict__)  # every property unset, whatever decoded before the error
            self.undecodable = f"undecodable AMQP properties: {type(exc).__name__}: {exc}"
            self.raw = bytes(encoded[offset:])
            return self


def install() -> None:
    """Make every connection of this process decode Basic properties with the guard (idempotent)."""
    pika.spec.props[pika.spec.BasicProperties.INDEX] = GuardedBasicProperties


def undecodable(props) -> str | None:
    """Why a delivery's properties did not decode, or None when they did."""
    return getattr(props, "undecodable", None)


def raw_header(props) -> dict[str, str]:
    """The header a dead letter keeps of undecodable properties (base64, at most MAX_RAW_BYTES)."""
    raw = getattr(props, "raw", b"")[:MAX_RAW_BYTES]
    return {RAW_PROPERTIES_HEADER: base64.b64encode(raw).decode()} if raw else {}
