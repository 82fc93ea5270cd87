"""The broker topology as plain data (no pika here): every process declares exactly these.

    ddm.jobs            durable queue of JobSpec messages (persistent), consumed by router workers
    ddm.expert.<k>      durable queue of VelocityRequest messages for expert k (competing replicas)
    ddm.decoder         durable queue of DecodeRequest messages (a latent deployment's decoder replicas)
    ddm.text            durable queue of EncodeRequest messages (a text deployment's text-encoder replicas)
    ddm.dlx             durable direct exchange for dead letters
    ddm.dead            durable queue bound to ddm.dlx with routing key "ddm.dead"

Both work queues dead-letter into ddm.dlx with routing key ddm.dead, so a rejected message is kept
for inspection instead of vanishing. Declaring a queue twice with different arguments is an error
in RabbitMQ (PRECONDITION_FAILED), which is why the arguments live in one place.

The queues are classic (one broker node; the default, DDM_QUEUE_TYPE=classic) or quorum (a cluster:
each queue is a Raft group replicated on every node, so it survives the loss of a minority of nodes;
DDM_QUEUE_TYPE=quorum). Every process of a deployment must declare the same type: a queue's type and
arguments cannot change once it exists.
"""

from __future__ import annotations

from ddm.schema.errors import SchemaError, expected
from ddm.schema.names import Names
from ddm.schema.settings import check_queue_type

CONTENT_TYPE = "application/x-msgpack"
REASON_HEADER = "x-ddm-reason"  # why a message was dead-lettered (set by the process that refused it)
SOURCE_QUEUE_HEADER = "x-ddm-queue"  # queue the refused message came from
WORKER_HEADER = "x-ddm-worker"  # id of the worker that refused it


QUEUE_TYPE_ARG = "x-queue-type"
DELIVERY_LIMIT_ARG = "x-delivery-limit"
MAX_PRIORITY_ARG = "x-max-priority"

# Job priorities: a job message carries an AMQP priority 0..JOB_MAX_PRIORITY (0, the default, is the
# lowest) and the broker hands higher ones to the routers first. A classic ddm.jobs is declared with
# x-max-priority = JOB_MAX_PRIORITY (one sub-queue per level in the broker, so few levels). Quorum queues
# refuse the argument: RabbitMQ >= 4.0 gives every quorum queue two levels of its own (5..9 high, 0..4
# normal, high favoured about 2:1); RabbitMQ 3.x ignores a message's priority there (first in, first out).
JOB_MAX_PRIORITY = 9

# Quorum queues count the returns of each message (a consumer that dies or closes its channel with the
# message unacked, or a nack with requeue, counts one) and dead-letter it into ddm.dlx -> ddm.dead
# (x-death reason "delivery_limit") once it comes back more than x-delivery-limit times, so it is
# delivered at most limit + 1 times: the broker's own poison handling, for the failures no process
# lives to report. Classic queues have nothing like it: such a message goes round the replicas forever.
# What each limit covers:
#
# - ddm.expert.<k>: a VelocityRequest that crashes (segfault, out of memory, kill by the kernel) every
#   expert replica that takes it. Without a limit it takes the replicas down one after another, forever.
#   A request is normally delivered once; a replica that stops cleanly hands its waiting requests back
#   (a nack each) and a broker node loss returns what its connections held, so 5 leaves room for those.
#   The router's sweep resends an unanswered request as a new message (a fresh count) a few times, then
#   fails the jobs in it naming the expert: a poison request costs its jobs, not every replica.
# - ddm.jobs: a JobSpec that crashes the router that runs it (each redelivery took down another router).
#   A job message stays unacked for its whole run and is redelivered each time its router dies or
#   loses the broker, and resumes from its stored step; so the limit is higher, 20 router losses during
#   one job, above anything but a crash loop.
#
# Bad input that a process can refuse (undecodable body, wrong content type, a spec that fails its
# checks) is still dead-lettered by that process with its reason (ddm/runtime/deadletter.py); the limit
# only catches what kills the process before it can say why. Dead-lettering by the limit is at most
# once in RabbitMQ 3.x (the broker's default dead-letter strategy for quorum queues): good enough for
# messages that are refused anyway.
EXPERT_DELIVERY_LIMIT = 5
JOBS_DELIVERY_LIMIT = 20


def work_queue_arguments(
    names: Names, queue_type: str = "classic", delivery_limit: int | None = None
) -> dict:
    """Queue arguments for ddm.jobs and every ddm.expert.<k>: dead letters to ddm.dlx; for a quorum
    queue also its type and delivery limit (see the limits above)."""
    args: dict[str, object] = {
        "x-dead-letter-exchange": names.dead_letter_exchange,
        "x-dead-letter-routing-key": names.dead_letter_queue,
    }
    if check_queue_type(queue_type) == "quorum":
        args[QUEUE_TYPE_ARG] = "quorum"
        if delivery_limit is not None:
            args[DELIVERY_LIMIT_ARG] = delivery_limit
    return args


def jobs_queue_arguments(names: Names, queue_type: str = "classic") -> dict:
    """ddm.jobs: a classic one also takes job priorities 0..JOB_MAX_PRIORITY (see above)."""
    args = work_queue_arguments(names, queue_type, JOBS_DELIVERY_LIMIT)
    if check_queue_type(queue_type) == "classic":
        args[MAX_PRIORITY_ARG] = JOB_MAX_PRIORITY
    return args


def check_job_priority(value: object) -> int:
    """A job priority: an int 0..JOB_MAX_PRIORITY, or a SchemaError that says what arrived."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= JOB_MAX_PRIORITY:
        raise SchemaError(expected(f"a job priority, an integer 0..{JOB_MAX_PRIORITY}", value))
    return value


def expert_queue_arguments(names: Names, queue_type: str = "classic") -> dict:
    """Every ddm.expert.<k>."""
    return work_queue_arguments(names, queue_type, EXPERT_DELIVERY_LIMIT)


def dead_letter_queue_arguments(queue_type: str = "classic") -> dict:
    """ddm.dead: no arguments on one node; a quorum queue on a cluster, so dead letters survive a node
    loss like the work they come from (no limit and no dead-lettering of its own: nothing consumes it)."""
    return {QUEUE_TYPE_ARG: "quorum"} if check_queue_type(queue_type) == "quorum" else {}
