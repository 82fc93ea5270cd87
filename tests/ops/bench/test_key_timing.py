"""The API-key timing benchmark (ops/bench/key_timing.py) runs on the real Redis: every kind of key gets
the answer it should (the right one 404 for a job nobody has, the others 401: the benchmark asserts
it), its table has every kind, and it leaves nothing under its prefix. Times are printed, never
asserted (docs/BENCHMARKS.md)."""

from __future__ import annotations

import secrets

from ddm.ops.bench import key_timing


def test_the_benchmark_measures_every_kind_and_cleans_up(capsys):
    import redis

    from ddm.schema.settings import Settings

    prefix = f"bench-keys-test-{secrets.token_hex(4)}:"
    times = key_timing.measure(5, prefix)
    assert set(times) == set(key_timing.KINDS) and all(len(ts) == 5 for ts in times.values())
    key_timing.report(times)
    out = capsys.readouterr().out
    assert all(f"| {kind} |" in out for kind in key_timing.KINDS)
    assert not list(redis.from_url(Settings.from_env().redis_url).scan_iter(match=f"{prefix}*"))
