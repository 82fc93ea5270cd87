"""ddm/runtime/amqp.py on the real RabbitMQ: several broker addresses (tried in turn, every one redacted in
errors), quorum queues declared on one node, and a queue declared with another type or other arguments
explained instead of retried forever."""

from __future__ import annotations

import dataclasses

import pytest

from ddm.router.metrics import RouterMetrics
from ddm.runtime.amqp import QueueMismatchError, connect, declare_topology, mismatch_message
from ddm.runtime.consumer import ConsumerRuntime
from ddm.schema.errors import ConfigError, ServiceUnavailableError
from ddm.schema.settings import Settings
from ddm.schema.topology import EXPERT_DELIVERY_LIMIT
from ddm.workers.stats import WorkerStats
from tests.support.services import amqp_channel, free_port


def dead_url(password: str = "guest") -> str:
    return f"amqp://guest:{password}@127.0.0.1:{free_port()}/%2F"  # nothing listens there


def test_connect_takes_the_node_that_answers(amqp_url):
    for url in (f"{dead_url()},{amqp_url}", [dead_url(), amqp_url, dead_url()]):
        for _ in range(4):  # wherever the turn starts, the dead ones are skipped
            conn = connect(url)
            assert conn.is_open
            conn.close()


def test_nodes_are_tried_in_order_then_in_turn(amqp_url):
    """The first connection goes to the first node listed; each later one starts from the node after
    the last that answered (a reconnect after a node loss goes straight to the next node)."""
    if "@127.0.0.1:" not in amqp_url:
        pytest.skip("needs the broker at 127.0.0.1, reachable as localhost too")
    nodes = f"{amqp_url},{amqp_url.replace('@127.0.0.1:', '@localhost:')},{dead_url()}"
    hosts = []
    for _ in range(4):
        conn = connect(nodes)
        hosts.append(conn._impl.params.host)
        conn.close()
    assert hosts == ["127.0.0.1", "localhost", "127.0.0.1", "localhost"]  # the dead third is skipped


def test_no_node_answers_names_every_one_redacted():
    urls = [dead_url("s3cret-1"), dead_url("s3cret-2")]
    with pytest.raises(ServiceUnavailableError) as err:
        connect(",".join(urls))
    text = str(err.value)
    assert text.startswith("no RabbitMQ answered at any of 2 nodes after 1 attempt(s)")
    assert "s3cret" not in text and text.count("amqp://guest:***@127.0.0.1:") == 2
    with pytest.raises(ServiceUnavailableError, match=r"at amqp://guest:\*\*\*@127\.0\.0\.1:\d+/%2F after"):
        connect(urls[0])  # one address: worded as before


def test_quorum_queues_declare_on_one_node_and_again(amqp_url, prefix):
    settings = Settings(amqp_url=amqp_url, prefix=prefix, queue_type="quorum")
    with amqp_channel() as ch:
        for _ in range(2):  # idempotent
            declare_topology(ch, settings.names, [0, 1], queue_type=settings.queue_type)
        ch.basic_publish("", settings.names.expert_queue(1), b"x")
        method, _, body = next(ch.consume(settings.names.expert_queue(1), inactivity_timeout=5))
        assert body == b"x"
        ch.basic_ack(method.delivery_tag)
        ch.cancel()


def test_the_delivery_limit_dead_letters_a_request_that_keeps_coming_back(settings):
    """A request no replica lives to answer (here: handed back each time) is delivered at most
    EXPERT_DELIVERY_LIMIT + 1 times, then lands in ddm.dead with RabbitMQ's reason."""
    queue = settings.names.expert_queue(0)
    with amqp_channel() as ch:
        ch.confirm_delivery()
        declare_topology(ch, settings.names, [0], queue_type="quorum")
        ch.basic_publish("", queue, b"poison")
        deliveries = 0
        for method, _, _ in ch.consume(queue, inactivity_timeout=2):
            if method is None:
                break
            deliveries += 1
            ch.basic_nack(method.delivery_tag, requeue=True)
        ch.cancel()
        method, props, body = next(ch.consume(settings.names.dead_letter_queue, inactivity_timeout=5))
        ch.basic_ack(method.delivery_tag)
    assert deliveries == EXPERT_DELIVERY_LIMIT + 1
    assert body == b"poison" and props.headers["x-first-death-reason"] == "delivery_limit"


@pytest.mark.parametrize("existing, asked", [("classic", "quorum"), ("quorum", "classic")])
def test_a_queue_of_another_type_is_explained(settings, existing, asked):
    with amqp_channel() as ch:
        declare_topology(ch, settings.names, [0], queue_type=existing)
    with amqp_channel() as ch, pytest.raises(QueueMismatchError) as err:
        declare_topology(ch, settings.names, [0], queue_type=asked)
    text = str(err.value)
    queue = settings.names.dead_letter_queue  # the first queue declared
    assert isinstance(err.value, ConfigError)
    assert f"queue {queue!r} already exists" in text and f"(DDM_QUEUE_TYPE={asked})" in text
    assert f"set DDM_QUEUE_TYPE={existing} on every process" in text  # what exists, and the fix
    assert f"`rabbitmqctl delete_queue {queue}`" in text and "PRECONDITION_FAILED" in text


def test_declare_reads_the_queue_type_from_the_environment(settings, monkeypatch):
    monkeypatch.setenv("DDM_QUEUE_TYPE", "quorum")
    with amqp_channel() as ch:
        declare_topology(ch, settings.names, [0])
    monkeypatch.setenv("DDM_QUEUE_TYPE", "classic")
    with amqp_channel() as ch, pytest.raises(QueueMismatchError, match="DDM_QUEUE_TYPE=quorum on every"):
        declare_topology(ch, settings.names, [0])


def test_other_mismatches_name_the_argument():
    text = mismatch_message(
        "p.ddm.jobs",
        {"x-delivery-limit": 20},
        "quorum",
        "PRECONDITION_FAILED - inequivalent arg 'x-delivery-limit' for queue 'p.ddm.jobs' in vhost 'prod': "
        "received '20' but current is '5'",
    )
    assert "x-delivery-limit is '5' on the broker, this process asks for '20'" in text
    assert "the same ddm version" in text and "`rabbitmqctl -p prod delete_queue p.ddm.jobs`" in text


class DeclareOnly:
    """A handler that only declares the topology, as every worker does first on a new connection."""

    stats = WorkerStats()

    def start(self) -> None: ...

    def attach(self, session) -> None:
        session.declare([0], jobs=True)

    def pump(self) -> None: ...

    def wait_s(self) -> float:
        return 0.05

    def detach(self, session, lost: bool) -> int:
        return 0

    def beat_static(self) -> dict[str, object]:
        return {"role": "router", "host": "test", "region": "local", "pid": 1}

    def beat_extra(self) -> dict[str, object]:
        return {}


def test_the_runtime_stops_on_a_mismatch_instead_of_reconnecting(settings):
    """A permanent mismatch ends the worker with the explanation (`ddm worker` prints it, exit 2; a
    supervisor's restart shows it again) rather than a reconnect loop that logs a bare 406."""
    with amqp_channel() as ch:
        declare_topology(ch, settings.names, [0], queue_type="classic")
    quorum = dataclasses.replace(settings, queue_type="quorum")  # a service reads its settings once
    runtime = ConsumerRuntime(quorum, "mismatch-test", DeclareOnly(), RouterMetrics("mismatch-test"))
    with pytest.raises(QueueMismatchError, match="set DDM_QUEUE_TYPE=classic"):
        runtime.run()
    assert runtime.metrics.reconnects._value.get() == 0


def test_a_refused_login_says_so_instead_of_asking_to_start_a_broker():
    with pytest.raises(ConfigError, match=r"refused the login of user 'guest' to vhost '/'") as caught:
        connect("amqp://guest:not-the-password@127.0.0.1:5672/%2F")
    assert "not-the-password" not in str(caught.value) and "Start one" not in str(caught.value)


def test_an_unknown_host_is_named_not_a_traceback():
    with pytest.raises(ServiceUnavailableError, match=r"unknown host 'nosuchhost.invalid'"):
        connect("amqp://guest:guest@nosuchhost.invalid:5672/%2F")


def test_only_a_refused_login_is_a_setting_to_fix():
    """pika raises ProbableAuthenticationError for any close during the handshake; a node shutting
    down is a node to retry, not a wrong password."""
    import pika.exceptions

    from ddm.runtime.amqp import _refused_login

    refused = pika.exceptions.ProbableAuthenticationError("(403) 'ACCESS_REFUSED - Login was refused'")
    vhost = pika.exceptions.ProbableAccessDeniedError("(530) 'NOT_ALLOWED - access to vhost 'x' refused'")
    shutdown = pika.exceptions.ProbableAuthenticationError("(320) 'CONNECTION_FORCED - broker forced'")
    assert _refused_login(refused) and _refused_login(vhost) and not _refused_login(shutdown)
