"""The one map from what went wrong to the exit code of `ddm`:

0  success
1  a runtime failure: a job failed, was cancelled, was not found or timed out; RabbitMQ or Redis
   did not answer or refused our login; a check of `ddm doctor` failed
2  a usage error: flags argparse refuses, or input that does not fit (SchemaError, ConfigError: a
   job the serving deployment refuses, a malformed deployment file, setting or path)
3  a degraded result: `ddm submit --wait` of a job some of whose steps ran without an expert that had
   no live worker, when the job did not ask for that itself (--on-expert-loss degrade)
"""

from __future__ import annotations

from ddm.schema.errors import ConfigError, DDMError, SchemaError

OK = 0
FAILURE = 1
USAGE = 2
DEGRADED = 3


def exit_code(exc: DDMError) -> int:
    from ddm.runtime.amqp import LoginRefusedError  # a ConfigError, but the service's answer, not usage

    if isinstance(exc, LoginRefusedError):
        return FAILURE
    return USAGE if isinstance(exc, SchemaError | ConfigError) else FAILURE
