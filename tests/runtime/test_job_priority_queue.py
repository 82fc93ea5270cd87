"""ddm.jobs from before job priorities (no x-max-priority) on the real broker: this version's declaration
is refused, and the error names the argument and the way to move (docs/DEPLOY.md section 13)."""

from __future__ import annotations

import pytest

from ddm.runtime.amqp import QueueMismatchError, declare_topology
from ddm.schema.topology import work_queue_arguments
from tests.support.services import amqp_channel


def test_a_jobs_queue_without_priorities_is_explained(settings):
    names = settings.names
    with amqp_channel() as ch:  # what an older ddm declared
        ch.queue_declare(names.jobs, durable=True, arguments=work_queue_arguments(names))
    with amqp_channel() as ch, pytest.raises(QueueMismatchError) as err:
        declare_topology(ch, names, queue_type="classic")
    text = str(err.value)
    assert f"queue {names.jobs!r} already exists" in text
    assert "x-max-priority is unset on the broker, this process asks for '9'" in text
    assert "let the routers empty it" in text and "docs/DEPLOY.md" in text
    assert f"`rabbitmqctl delete_queue {names.jobs}`" in text


def test_quorum_jobs_queue_declares_without_priorities(settings):
    with amqp_channel() as ch:  # quorum queues refuse x-max-priority: it must not be declared
        declare_topology(ch, settings.names, queue_type="quorum")
        declare_topology(ch, settings.names, queue_type="quorum")
