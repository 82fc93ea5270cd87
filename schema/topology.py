"""The broker topology as plain data (no pika here): every process declares exactly these.

    ddm.jobs            durable queue of JobSpec messages (persistent), consumed by router workers
    ddm.expert.<k>      durable queue of VelocityRequest messages for expert k (competing replicas)
    ddm.dlx             durable direct exchange for dead letters
    ddm.dead            durable queue bound to ddm.dlx with routing key "ddm.dead"

Both work queues dead-letter into ddm.dlx with routing key ddm.dead, so a rejected message is kept
for inspection instead of vanishing. Declaring a queue twice with different arguments is an error
in RabbitMQ (PRECONDITION_FAILED), which is why the arguments live in one place.
"""

from __future__ import annotations

from ddm.schema.names import Names

CONTENT_TYPE = "application/x-msgpack"
REASON_HEADER = "x-ddm-reason"  # why a message was dead-lettered (set by the process that refused it)
SOURCE_QUEUE_HEADER = "x-ddm-queue"  # queue the refused message came from
WORKER_HEADER = "x-ddm-worker"  # id of the worker that refused it


def work_queue_arguments(names: Names) -> dict:
    """Queue arguments for ddm.jobs and every ddm.expert.<k>."""
    return {
        "x-dead-letter-exchange": names.dead_letter_exchange,
        "x-dead-letter-routing-key": names.dead_letter_queue,
    }
