"""Settings: defaults, a dict environment, and refusals that name the variable."""

import pytest

from ddm.schema import ConfigError, Names, Settings
from ddm.schema.settings import ENV_VARS, queue_type_from_env, redact


def test_defaults():
    s = Settings.from_env({})
    assert s == Settings()
    assert s.amqp_url == "amqp://guest:guest@127.0.0.1:5672/%2F"
    assert s.redis_url == "redis://127.0.0.1:6379/0"
    assert (s.prefix, s.region, s.data_dir) == ("", "local", "data")
    assert (s.request_timeout_s, s.max_batch, s.max_wait_ms) == (10.0, 32, 0.0)
    assert (s.job_ttl_s, s.heartbeat_s, s.heartbeat_ttl_s) == (86400, 2.0, 10)
    assert s.max_message_bytes == 16 * 1024 * 1024
    assert (s.deployment, s.metrics_port) == ("", 0)
    assert s.queue_type == "classic"
    assert s.amqp_urls == (s.amqp_url,)
    assert s.names == Names("")


def test_from_dict_environment():
    env = {
        "DDM_AMQP_URL": "amqps://u:p@mq.example:5671/prod",
        "DDM_REDIS_URL": "rediss://:pw@cache:6380/2",
        "DDM_PREFIX": "ci-7.",
        "DDM_REQUEST_TIMEOUT_S": "2.5",
        "DDM_MAX_BATCH": "128",
        "DDM_MAX_WAIT_MS": "7.5",
        "DDM_JOB_TTL_S": "60",
        "DDM_QUEUED_TTL_S": "3600",
        "DDM_HEARTBEAT_S": "0.5",
        "DDM_HEARTBEAT_TTL_S": "3",
        "DDM_REGION": "eu-west-1",
        "DDM_DATA_DIR": "/srv/ddm data",
        "DDM_MAX_MESSAGE_BYTES": "1048576",
        "DDM_DEPLOYMENT": "/app/checkpoints/mnist/deployment.toml",
        "DDM_METRICS_PORT": "9100",
        "DDM_METRICS_BIND": "::",
        "DDM_QUEUE_TYPE": "quorum",
        "DDM_LOG_LEVEL": "debug",
        "DDM_LOG_FORMAT": "json",
        "DDM_JAX_CACHE_DIR": "/var/cache/ddm/jax",
        "DDM_TRACE_CACHE_DIR": "/var/cache/ddm/traced",
        "DDM_EXPERT_GRACE_S": "12",
        "DDM_EXPERT_LOSS_GRACE_S": "4.5",
        "DDM_HEDGE_FLOOR_MS": "80",
        "DDM_HEDGE_MAX_FRACTION": "0.1",
        "DDM_CRASH_LIMIT": "2",
        "UNRELATED": "ignored",
    }
    s = Settings.from_env(env)
    assert s.amqp_url == env["DDM_AMQP_URL"] and s.redis_url == env["DDM_REDIS_URL"]
    assert (s.request_timeout_s, s.max_batch, s.max_wait_ms, s.job_ttl_s) == (2.5, 128, 7.5, 60)
    assert (s.heartbeat_s, s.heartbeat_ttl_s, s.region, s.data_dir) == (0.5, 3, "eu-west-1", "/srv/ddm data")
    assert s.max_message_bytes == 1 << 20
    assert (s.deployment, s.metrics_port) == ("/app/checkpoints/mnist/deployment.toml", 9100)
    assert s.metrics_bind == "::"
    assert s.queue_type == "quorum"
    assert (s.log_level, s.log_format, s.jax_cache_dir) == ("DEBUG", "json", "/var/cache/ddm/jax")
    assert s.trace_cache_dir == "/var/cache/ddm/traced"
    assert (s.expert_grace_s, s.hedge_floor_ms, s.hedge_max_fraction) == (12.0, 80.0, 0.1)
    assert s.expert_loss_grace_s == 4.5
    assert s.crash_limit == 2 and Settings().crash_limit == 3
    assert s.queued_ttl_s == 3600 and Settings().queued_ttl_s == 86400
    assert type(s.max_wait_ms) is float and type(s.max_batch) is int
    assert s.names.jobs == "ci-7.ddm.jobs"
    assert set(ENV_VARS.values()) == set(env) - {"UNRELATED"}  # every field has its variable


def test_reads_os_environ(monkeypatch):
    monkeypatch.setenv("DDM_REGION", "lab")
    assert Settings.from_env().region == "lab"


@pytest.mark.parametrize(
    "var, value",
    [
        ("DDM_AMQP_URL", "http://x"),
        ("DDM_AMQP_URL", ""),
        ("DDM_REDIS_URL", "127.0.0.1:6379"),
        ("DDM_REDIS_URL", "redis://a b"),
        ("DDM_PREFIX", "bad prefix"),
        ("DDM_REQUEST_TIMEOUT_S", "ten"),
        ("DDM_REQUEST_TIMEOUT_S", "0"),
        ("DDM_REQUEST_TIMEOUT_S", "nan"),
        ("DDM_REQUEST_TIMEOUT_S", "inf"),
        ("DDM_MAX_BATCH", "0"),
        ("DDM_MAX_BATCH", "3.5"),
        ("DDM_MAX_BATCH", " 8"),
        ("DDM_MAX_BATCH", "1_000"),
        ("DDM_MAX_BATCH", ""),
        ("DDM_MAX_WAIT_MS", "-1"),
        ("DDM_JOB_TTL_S", "-5"),
        ("DDM_HEARTBEAT_S", "0"),
        ("DDM_HEARTBEAT_TTL_S", "2"),  # not more than the default heartbeat of 2 s
        ("DDM_REGION", ""),
        ("DDM_REGION", "eu west"),
        ("DDM_DATA_DIR", ""),
        ("DDM_MAX_MESSAGE_BYTES", "100"),
        ("DDM_MAX_MESSAGE_BYTES", "16MiB"),
        ("DDM_METRICS_PORT", "-1"),
        ("DDM_METRICS_PORT", "65536"),
        ("DDM_METRICS_PORT", "http"),
        ("DDM_DEPLOYMENT", "a\x00b"),
        ("DDM_QUEUE_TYPE", "Quorum"),  # never quietly fixed
        ("DDM_QUEUE_TYPE", ""),
        ("DDM_QUEUE_TYPE", "stream"),
        ("DDM_AMQP_URL", "amqp://a/,"),
        ("DDM_AMQP_URL", "amqp://a/,,amqp://b/"),
        ("DDM_AMQP_URL", "amqp://a/,http://b/"),
        ("DDM_AMQP_URL", "amqp://a/, amqp://b/"),
    ],
)
def test_bad_values_name_the_variable(var, value):
    with pytest.raises(ConfigError) as err:
        Settings.from_env({var: value})
    text = str(err.value)
    assert text.startswith(f"{var}: expected ") and ", got " in text


def test_direct_construction_is_checked():
    with pytest.raises(ConfigError, match="DDM_MAX_BATCH"):
        Settings(max_batch=True)
    with pytest.raises(ConfigError, match="DDM_HEARTBEAT_TTL_S"):
        Settings(heartbeat_s=5.0, heartbeat_ttl_s=5)


def test_repr_hides_passwords():
    s = Settings(amqp_url="amqp://user:s3cret@mq:5672/%2F", redis_url="redis://:hunter2@cache:6379/0")
    assert "s3cret" not in repr(s) and "hunter2" not in repr(s)
    assert redact("amqp://user:s3cret@mq/") == "amqp://user:***@mq/"
    assert redact("redis://cache:6379/0") == "redis://cache:6379/0"  # a port is not a password


def test_queue_type_names_the_choices():
    with pytest.raises(ConfigError) as err:
        Settings(queue_type="mirrored")
    assert (
        "DDM_QUEUE_TYPE" in str(err.value) and "'classic'" in str(err.value) and "'quorum'" in str(err.value)
    )
    assert queue_type_from_env({}) == "classic"
    assert queue_type_from_env({"DDM_QUEUE_TYPE": "quorum"}) == "quorum"
    with pytest.raises(ConfigError, match="DDM_QUEUE_TYPE"):
        queue_type_from_env({"DDM_QUEUE_TYPE": "QUORUM"})


def test_several_broker_nodes():
    nodes = "amqp://u:p1@mq-1:5672/%2F,amqp://u:p2@mq-2:5672/%2F,amqps://u:p3@mq-3:5671/prod"
    s = Settings.from_env({"DDM_AMQP_URL": nodes})
    assert s.amqp_url == nodes  # kept as given
    assert s.amqp_urls == (
        "amqp://u:p1@mq-1:5672/%2F",
        "amqp://u:p2@mq-2:5672/%2F",
        "amqps://u:p3@mq-3:5671/prod",
    )
    shown = repr(s)
    assert not any(p in shown for p in ("p1@", "p2@", "p3@"))
    assert (
        redact(nodes) == "amqp://u:***@mq-1:5672/%2F,amqp://u:***@mq-2:5672/%2F,amqps://u:***@mq-3:5671/prod"
    )
    # a node without credentials next to one with them
    assert redact("amqp://mq-1:5672,amqp://u:p@mq-2/") == "amqp://mq-1:5672,amqp://u:***@mq-2/"


def test_a_comma_in_a_password_is_refused_without_showing_it():
    """A raw comma would split the URL in two: refused, naming the fix (%2C), with no part of the
    password in the message."""
    with pytest.raises(ConfigError) as err:
        Settings(amqp_url="amqp://user:hunter,two@mq:5672/%2F")
    text = str(err.value)
    assert "%2C" in text and "hunter" not in text and "two@" not in text
    assert Settings(amqp_url="amqp://user:se%2Ccret@mq:5672/%2F").amqp_urls == (
        "amqp://user:se%2Ccret@mq:5672/%2F",
    )
