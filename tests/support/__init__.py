"""Test support, imported by tests (never a test module or a conftest):

    services.py    the real RabbitMQ and Redis: URLs, unique prefixes and their cleanup, a channel, a port
    harness.py     `ddm` worker processes (Pipeline), their output and readiness, the local reference
    fakes.py       checkpoint folders and deployment files without training, a fake cluster in Redis
    constants.py   values shared by tests (TEST_BUCKETS)
    data.py        real data sets where present (the shared MNIST files), and the skip when absent

Fixtures built on these live in the conftest.py files; pytest hands them to the tests.
"""
