"""The one map from what went wrong to the exit code of `ddm`:

0  success
1  a runtime failure: a job failed, was cancelled, was not found or timed out; RabbitMQ or Redis
   did not answer; a check of `ddm doctor` failed
2  a usage error: flags argparse refuses, or input that does not fit (SchemaError, ConfigError: a
   job the serving deployment refuses, a malformed deployment file, setting or path)
"""

from __future__ import annotations

from ddm.schema.errors import ConfigError, DDMError, SchemaError

OK = 0
FAILURE = 1
USAGE = 2


def exit_code(exc: DDMError) -> int:
    return USAGE if isinstance(exc, SchemaError | ConfigError) else FAILURE
