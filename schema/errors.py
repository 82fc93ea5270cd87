"""One small exception hierarchy. Every message says what was expected and what arrived."""


class DDMError(Exception):
    """Base class for every error this project raises on purpose."""


class SchemaError(DDMError, ValueError):
    """A message, array or spec does not match the contract in ddm.schema."""


class ConfigError(DDMError, ValueError):
    """A deployment file, checkpoint folder, preset or setting is missing or malformed."""


class DeviceError(DDMError, RuntimeError):
    """The requested device (cuda, neuron, gpu) is not usable on this host."""


def expected(what: str, got: object) -> str:
    """Uniform wording for errors: 'expected X, got Y'."""
    text = repr(got)
    if len(text) > 200:
        text = text[:200] + "..."
    return f"expected {what}, got {text}"


class ServiceUnavailableError(DDMError, ConnectionError):
    """RabbitMQ or Redis did not answer at the configured address."""
