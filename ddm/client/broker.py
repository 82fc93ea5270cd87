"""The client's one broker connection (Client.submit: the worker checks and the job's publish), kept
between calls and reopened when the broker has dropped it.

pika's BlockingConnection does its I/O only inside a call, so an idle client answers no heartbeats and
the broker resets it after a few minutes (connect()'s heartbeat is 30 s; measured on RabbitMQ 3.10:
still open after 75 s idle, reset by 210 s): pika learns of it only on the next call, as a
StreamLostError (or ConnectionClosedByBroker after a broker-side close). So every operation runs
through BrokerLink.run, which first polls the cached connection without waiting (a drop the broker
already made shows there, before anything is sent), and after a connection error during the operation
closes, reopens and runs it once more. Only operations safe to run twice go through it: a passive
queue declare, and a job's publish (a job message delivered twice runs once: the router running it
acks the copy, router/worker.py RouterWorker._admit; another router holds the copy while the lease is
taken and settles it unrun once the job has ended, router/intake.py Intake.decide). Whatever still
fails is a ddm error that names the operation, never a raw pika exception.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable
from typing import TypeVar

import pika.exceptions

from ddm.runtime.amqp import CONNECTION_ERRORS, connect, declare_topology
from ddm.schema.errors import DDMError, ServiceUnavailableError
from ddm.schema.settings import Settings

T = TypeVar("T")


def client_connection_name(prefix: str) -> str:
    """What `rabbitmqctl list_connections client_properties` shows for a client: its prefix, host, pid."""
    return f"{prefix}ddm-client-{socket.gethostname()}-{os.getpid()}"


def open_confirm_channel(settings: Settings):
    """A new connection's channel in confirm mode (basic_publish returns once the broker has the
    message), with the pipeline's queues declared."""
    connection = connect(settings.amqp_url, name=client_connection_name(settings.prefix))
    try:
        channel = connection.channel()
        channel.confirm_delivery()
        declare_topology(channel, settings.names, queue_type=settings.queue_type)
    except BaseException:
        with contextlib.suppress(Exception):
            connection.close()
        raise
    return channel


def consumer_count(channel, queue: str) -> int:
    """Consumers on `queue` now, 0 when nobody declared it yet: a passive declare on a short-lived
    channel of `channel`'s connection (the broker closes the channel a 404 happens on)."""
    probe = channel.connection.channel()
    try:
        return probe.queue_declare(queue, passive=True).method.consumer_count
    except pika.exceptions.ChannelClosedByBroker as exc:
        if exc.reply_code == 404:  # no such queue: nobody consumes it
            return 0
        raise DDMError(
            f"the broker refused a passive declare of {queue} (expected the queue or 404 NOT_FOUND): "
            f"{exc.reply_code} {exc.reply_text}"
        ) from None
    finally:
        if probe.is_open:
            probe.close()


class BrokerLink:
    """Runs operations on one cached channel (open_channel() makes it), reopened after a drop.
    Not thread-safe: a pika connection stays on one thread (AsyncClient gives it one)."""

    def __init__(self, open_channel: Callable[[], object]):
        self._open_channel = open_channel
        self._channel = None

    def run(self, what: str, operation: Callable[[object], T]) -> T:
        """operation(channel), retried once on a fresh connection after a connection error; it must be
        safe to run twice. `what` names it in errors ("publish job J on ddm.jobs"). Raises
        ServiceUnavailableError when the second try fails too, DDMError for any other broker error,
        and the ddm errors of opening a connection (ServiceUnavailableError, LoginRefusedError, ...)."""
        for retry in (False, True):
            try:
                return operation(self._live_channel())
            except DDMError:
                raise  # already says what failed (no broker answered, a queue mismatch, a refused job)
            except CONNECTION_ERRORS as exc:
                self.close()  # dropped (while idle, most likely): reopen and try once more
                if retry:
                    raise ServiceUnavailableError(
                        f"could not {what}: the broker connection failed again after a reopen ({exc!r})"
                    ) from exc
            except pika.exceptions.AMQPError as exc:
                self.close()  # a state we do not know: the next call starts clean
                raise DDMError(f"could not {what}: the broker answered {exc!r}") from exc
        raise AssertionError("not reached: the retry returns or raises")

    def _live_channel(self):
        """The cached channel after a zero-wait poll of its connection (which raises if the broker has
        closed or reset it while idle), or a new one."""
        channel = self._channel
        if channel is None or not channel.is_open or not channel.connection.is_open:
            self.close()
            self._channel = self._open_channel()
            return self._channel
        channel.connection.process_data_events(time_limit=0)
        return channel

    def close(self) -> None:
        if self._channel is not None:
            with contextlib.suppress(Exception):
                self._channel.connection.close()
        self._channel = None
