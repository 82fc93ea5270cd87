"""Queue arguments: classic exactly as before (the default must not change a byte) but for ddm.jobs's
job priorities, quorum with its type and delivery limits, and a refusal for any other type."""

import pytest

from ddm.schema import ConfigError, Names, SchemaError
from ddm.schema.topology import (
    EXPERT_DELIVERY_LIMIT,
    JOB_MAX_PRIORITY,
    JOBS_DELIVERY_LIMIT,
    check_job_priority,
    dead_letter_queue_arguments,
    expert_queue_arguments,
    jobs_queue_arguments,
    work_queue_arguments,
)

NAMES = Names("p.")
DEAD_LETTERS = {"x-dead-letter-exchange": "p.ddm.dlx", "x-dead-letter-routing-key": "p.ddm.dead"}


def test_classic_is_the_default_and_unchanged():
    assert work_queue_arguments(NAMES) == DEAD_LETTERS
    assert expert_queue_arguments(NAMES) == DEAD_LETTERS
    priorities = DEAD_LETTERS | {"x-max-priority": JOB_MAX_PRIORITY}
    assert jobs_queue_arguments(NAMES) == jobs_queue_arguments(NAMES, "classic") == priorities
    assert dead_letter_queue_arguments() == dead_letter_queue_arguments("classic") == {}


def test_quorum_keeps_the_dead_letters_and_adds_type_and_limits():
    jobs = jobs_queue_arguments(NAMES, "quorum")  # no x-max-priority: quorum queues refuse it
    experts = expert_queue_arguments(NAMES, "quorum")
    assert jobs == DEAD_LETTERS | {"x-queue-type": "quorum", "x-delivery-limit": JOBS_DELIVERY_LIMIT}
    assert experts == DEAD_LETTERS | {"x-queue-type": "quorum", "x-delivery-limit": EXPERT_DELIVERY_LIMIT}
    # a job survives many router losses; a request that kills replicas is given up sooner
    assert JOBS_DELIVERY_LIMIT > EXPERT_DELIVERY_LIMIT >= 3
    assert dead_letter_queue_arguments("quorum") == {"x-queue-type": "quorum"}
    assert work_queue_arguments(NAMES, "quorum") == DEAD_LETTERS | {"x-queue-type": "quorum"}


@pytest.mark.parametrize("queue_type", ["Quorum", "stream", "", None])
def test_other_types_are_refused(queue_type):
    with pytest.raises(ConfigError, match="DDM_QUEUE_TYPE"):
        work_queue_arguments(NAMES, queue_type)
    with pytest.raises(ConfigError, match="DDM_QUEUE_TYPE"):
        dead_letter_queue_arguments(queue_type)


@pytest.mark.parametrize("value", [0, 5, JOB_MAX_PRIORITY])
def test_job_priorities_in_range_pass(value):
    assert check_job_priority(value) == value


@pytest.mark.parametrize("value", [-1, JOB_MAX_PRIORITY + 1, 1.5, "3", True, None])
def test_job_priorities_out_of_range_are_refused(value):
    with pytest.raises(SchemaError, match=f"a job priority, an integer 0..{JOB_MAX_PRIORITY}, got"):
        check_job_priority(value)
