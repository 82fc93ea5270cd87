"""Queue depths without the management API: message and consumer counts by passive declares over one
connection of its own (the web UI's cluster panel, `ddm workers`)."""

from __future__ import annotations

import contextlib
import logging


class _NoMissingQueueWarnings(logging.Filter):
    """pika warns about every channel the broker closes; a passive declare of a queue that does not
    exist yet (no worker has declared it) closes one every few seconds, which is expected here."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Channel.Close (404)" not in record.getMessage()


class QueueProbe:
    """Message and consumer counts of named queues over one AMQP connection (passive declares).

    Not thread-safe (pika's BlockingConnection is not): callers hold ClusterMonitor's lock.
    """

    _filter = _NoMissingQueueWarnings()

    def __init__(self, amqp_url: str):
        self.amqp_url = amqp_url
        self._conn = None
        self._channel = None
        channel_log = logging.getLogger("pika.channel")
        if self._filter not in channel_log.filters:
            channel_log.addFilter(self._filter)

    def _open(self):
        from ddm.runtime.amqp import connect

        if self._conn is None or not self._conn.is_open:
            self._conn = connect(self.amqp_url, name="ddm-webui")
            self._channel = None
        if self._channel is None or not self._channel.is_open:
            self._channel = self._conn.channel()
        return self._channel

    def depths(self, queues: list[str]) -> dict[str, dict[str, int] | None]:
        """{queue: {"messages", "consumers"}} (None for a queue that does not exist yet)."""
        import pika.exceptions

        out: dict[str, dict[str, int] | None] = {}
        for name in queues:
            channel = self._open()
            try:
                ok = channel.queue_declare(queue=name, passive=True)
                out[name] = {"messages": ok.method.message_count, "consumers": ok.method.consumer_count}
            except pika.exceptions.ChannelClosedByBroker as exc:
                if exc.reply_code != 404:
                    raise
                out[name] = None  # the broker closed the channel: _open makes a new one
                self._channel = None
        if self._conn is not None:
            self._conn.process_data_events(0)  # service heartbeats between snapshots
        return out

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
        self._conn = self._channel = None
