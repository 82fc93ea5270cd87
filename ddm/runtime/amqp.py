"""RabbitMQ plumbing shared by the expert worker, the router worker and the client (pika).

pika's BlockingConnection is not thread-safe: one connection per thread, and only that thread touches
it (another thread may only wake it, with connection.add_callback_threadsafe).

A broker address may name several nodes of one cluster (DDM_AMQP_URL="amqp://...@a:5672/%2F,amqp://...
@b:5672/%2F"): connect() tries them in turn and takes the first that answers. The first connection
tries them in the order given (list them in another order on other hosts to spread the connections);
every later one starts from the node after the one that answered last, so a reconnect after a node
loss goes straight to the next node instead of waiting on the dead one first. (pika's own
BlockingConnection([params, ...]) tries a sequence in order, always from the first; the loop here also
says which node answered and why each other one did not.)
"""

from __future__ import annotations

import logging
import random
import re
import socket
import time
from collections.abc import Iterable, Sequence

import pika
import pika.exceptions

from ddm.runtime.property_guard import install as install_property_guard
from ddm.schema.errors import ConfigError, ServiceUnavailableError
from ddm.schema.names import Names
from ddm.schema.settings import check_queue_type, queue_type_from_env, redact, split_urls
from ddm.schema.topology import (
    MAX_PRIORITY_ARG,
    QUEUE_TYPE_ARG,
    dead_letter_queue_arguments,
    expert_queue_arguments,
    jobs_queue_arguments,
)

log = logging.getLogger(__name__)

# the URLs of a multi-node address -> the index connect() tries first next time
_next_node: dict[tuple[str, ...], int] = {}

# Errors after which a worker reconnects (broker restart, network blip, heartbeat timeout).
CONNECTION_ERRORS = (
    pika.exceptions.AMQPConnectionError,
    pika.exceptions.ConnectionClosedByBroker,
    pika.exceptions.ChannelClosedByBroker,
    pika.exceptions.StreamLostError,
    pika.exceptions.ChannelWrongStateError,
    ConnectionError,
    OSError,
)


# What pika raises when the broker closes the connection during the handshake: a refused login
# (403 ACCESS_REFUSED, 530 NOT_ALLOWED to the vhost), but also a node shutting down (320) or a stream
# cut mid-handshake. Only the first two are a wrong setting (_refused_login).
LOGIN_REFUSED = (
    pika.exceptions.ProbableAuthenticationError,
    pika.exceptions.ProbableAccessDeniedError,
    pika.exceptions.AuthenticationError,
)


class LoginRefusedError(ConfigError):
    """The broker refused this user, password or vhost: a setting to fix, not a node to retry."""


def _refused_login(exc: BaseException) -> bool:
    text = str(exc)
    return "ACCESS_REFUSED" in text or ("NOT_ALLOWED" in text and "vhost" in text)


def login_refused_message(url: str, exc: BaseException) -> str:
    params = pika.URLParameters(url)
    return (
        f"RabbitMQ at {redact(url)} refused the login of user {params.credentials.username!r} to vhost "
        f"{params.virtual_host!r} ({type(exc).__name__}): check the user, password and vhost in "
        f"DDM_AMQP_URL (`rabbitmqctl list_users`, `rabbitmqctl list_permissions -p {params.virtual_host}`)"
    )


def connection_parameters(url: str, heartbeat: int = 30, name: str | None = None) -> pika.URLParameters:
    params = pika.URLParameters(url)
    if name:  # shown by `rabbitmqctl list_connections client_properties` and the management UI
        params.client_properties = {"connection_name": name}
    params.heartbeat = heartbeat
    params.blocked_connection_timeout = 60
    params.connection_attempts = 1
    params.socket_timeout = 5
    return params


class QueueMismatchError(ConfigError):
    """A queue exists on the broker with another type or other arguments than this process declares
    (RabbitMQ's 406 PRECONDITION_FAILED). Permanent until someone changes the setting or the queue."""


def connect(
    url: str | Sequence[str],
    *,
    attempts: int | None = 1,
    max_backoff_s: float = 10.0,
    name: str | None = None,
) -> pika.BlockingConnection:
    """Open a BlockingConnection, retrying with bounded exponential backoff and jitter.

    url: one URL, several nodes of a cluster separated by commas, or a sequence of URLs; every round
    tries each of them once, in turn (see the module docstring). attempts=None retries forever (workers
    across a broker restart); the error says where it tried. name labels the connection on the broker
    (e.g. the worker id).
    """
    install_property_guard()  # a message with undecodable properties must not end the connection
    urls = tuple(split_urls(url) if isinstance(url, str) else url)
    delay, tried = 0.25, 0
    while True:
        tried += 1
        first = _next_node.get(urls, 0)
        failures: list[tuple[str, str]] = []
        for i in range(first, first + len(urls)):
            one = urls[i % len(urls)]
            try:
                conn = pika.BlockingConnection(connection_parameters(one, name=name))
            except LOGIN_REFUSED as exc:
                if _refused_login(exc):  # no retry helps: the settings are wrong
                    raise LoginRefusedError(login_refused_message(one, exc)) from None
                failures.append((redact(one), repr(exc)))  # pika's name for any drop mid-handshake
                continue
            except socket.gaierror as exc:
                failures.append(
                    (redact(one), f"unknown host {pika.URLParameters(one).host!r}: {exc.strerror}")
                )
                continue
            except pika.exceptions.AMQPConnectionError as exc:
                failures.append((redact(one), repr(exc)))
                continue
            if len(urls) > 1:
                _next_node[urls] = (i + 1) % len(urls)
                log.info("connected to the broker node at %s", redact(one))
            return conn
        if len(urls) == 1:
            ((where, why),) = failures
        else:
            where, why = f"any of {len(urls)} nodes", "; ".join(f"{u}: {e}" for u, e in failures)
        if attempts is not None and tried >= attempts:
            raise ServiceUnavailableError(
                f"no RabbitMQ answered at {where} after {tried} attempt(s) ({why}). Start one "
                "(`rabbitmq-server -detached`, or `docker compose up rabbitmq`) or set DDM_AMQP_URL."
            ) from None
        log.warning("broker not reachable at %s (%s); retrying in %.1f s", where, why, delay)
        time.sleep(delay * (0.5 + random.random()))
        delay = min(max_backoff_s, delay * 2)


def declare_topology(
    channel,
    names: Names,
    expert_ids: Iterable[int] = (),
    *,
    jobs: bool = True,
    queue_type: str | None = None,
    decoder: bool = False,
    text: bool = False,
) -> None:
    """Declare the dead-letter exchange/queue, ddm.jobs (unless jobs=False), the given expert queues,
    with decoder=True ddm.decoder and with text=True ddm.text (idempotent). Expert workers pass
    jobs=False: declaring needs the configure permission, and an expert's broker user has none on
    ddm.jobs (docs/DEPLOY.md).

    queue_type: 'classic' or 'quorum' (None: DDM_QUEUE_TYPE). A queue that exists with another type or
    other arguments raises QueueMismatchError, which says what exists, what was asked and how to fix it;
    the broker closes the channel with it.
    """
    queue_type = queue_type_from_env() if queue_type is None else check_queue_type(queue_type)
    channel.exchange_declare(names.dead_letter_exchange, exchange_type="direct", durable=True)
    _declare_queue(channel, names.dead_letter_queue, dead_letter_queue_arguments(queue_type), queue_type)
    channel.queue_bind(
        names.dead_letter_queue, names.dead_letter_exchange, routing_key=names.dead_letter_queue
    )
    if jobs:
        _declare_queue(channel, names.jobs, jobs_queue_arguments(names, queue_type), queue_type)
    for k in expert_ids:
        args = expert_queue_arguments(names, queue_type)
        _declare_queue(channel, names.expert_queue(k), args, queue_type)
    if decoder:  # an expert queue's twin: its requests are pure functions too (the same delivery limit)
        _declare_queue(channel, names.decoder_queue, expert_queue_arguments(names, queue_type), queue_type)
    if text:  # the text encoder's requests are pure functions too
        _declare_queue(channel, names.text_queue, expert_queue_arguments(names, queue_type), queue_type)


def _declare_queue(channel, queue: str, arguments: dict, queue_type: str) -> None:
    try:
        channel.queue_declare(queue, durable=True, arguments=arguments or None)
    except pika.exceptions.ChannelClosedByBroker as exc:
        if exc.reply_code != 406:
            raise
        raise QueueMismatchError(mismatch_message(queue, arguments, queue_type, exc.reply_text)) from None


# PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'q' in vhost '/': received the value
# 'quorum' of type 'longstr' but current is none
_MISMATCH_RE = re.compile(
    r"inequivalent arg '(?P<arg>[^']+)' for queue '[^']*' in vhost '(?P<vhost>[^']*)': "
    r"received (?P<asked>.+) but current is (?P<exists>.+)"
)
_VALUE_RE = re.compile(r"(?:the value )?'(?P<value>[^']*)'")


def _raw_value(text: str) -> str | None:
    """An argument value in the broker's words ("none", "'20'", "the value 'quorum' of type ...")."""
    m = _VALUE_RE.match(text)
    return None if text == "none" else m["value"] if m else text


def _shown(text: str) -> str:
    value = _raw_value(text)
    return "unset" if value is None else repr(value)


def mismatch_message(queue: str, arguments: dict, queue_type: str, broker_text: str) -> str:
    """What exists, what was asked and how to fix it, from the broker's 406 reply text."""
    m = _MISMATCH_RE.search(broker_text or "")
    vhost = m["vhost"] if m else "/"
    if m is None:
        differs = f"it differs from what this process declares ({arguments})"
    else:
        differs = (
            f"{m['arg']} is {_shown(m['exists'])} on the broker, this process asks for {_shown(m['asked'])}"
        )
    if m is not None and m["arg"] == QUEUE_TYPE_ARG:
        exists = _raw_value(m["exists"]) or "classic"
        match = f"set DDM_QUEUE_TYPE={exists} on every process of this deployment to match it"
    elif m is not None and m["arg"] == MAX_PRIORITY_ARG:  # a ddm.jobs from before job priorities
        match = (
            "let the routers empty it (stop the submitters, wait for `ddm workers` to show it at 0) "
            "and run this ddm version everywhere (docs/DEPLOY.md, job priorities)"
        )
    else:
        match = "run the same ddm version with the same DDM_QUEUE_TYPE everywhere"
    vhost_flag = "" if vhost == "/" else f" -p {vhost}"
    return (
        f"queue {queue!r} already exists with other arguments than this process declares "
        f"(DDM_QUEUE_TYPE={queue_type}): {differs}. A queue's type and arguments cannot change once "
        f"it exists. Either {match}, or delete the queue (its messages are lost: "
        f"`rabbitmqctl{vhost_flag} delete_queue {queue}`) and let the processes declare it again. "
        f"The broker said: {broker_text}"
    )
