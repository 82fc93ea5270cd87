"""Hostile traffic for the pipeline's queues: what an outside fuzz run sends, reproducible by seed
(properties.py: AMQP properties and headers pika cannot decode; run.py: the 10k run against a live
pipeline)."""
