"""Does the web UI's answer time say anything about a key? (issue 39: "the response time of a wrong key
and a right one differ by no more than noise"). Sends GET /api/jobs/<id> for a job of nobody's through
the real app (in-process Flask client, the real Redis, a private prefix removed afterwards), with keys
of five kinds interleaved at random so that drift falls on all alike, and prints each kind's time.

    python -m ddm.ops.bench.key_timing [--n 2000]

What to compare: the three wrong keys a guesser could hold (an unknown id, the right id with a wrong
secret, the right id with the secret wrong in its last character) must agree within noise, since each
costs one salted hash and one Redis read. A malformed key is answered before any of that (its shape is
public: nothing to hide), and the right key is slower by what its route then does (one more Redis
read for the job). Results: docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import secrets
import statistics
import time

KINDS = ("right key", "unknown id", "wrong secret", "last char wrong", "malformed")


def _keys(store) -> dict[str, str]:
    key = store.create("bench-user", "read")[1]
    key_id, _, secret = key.partition(".")
    last = "A" if secret[-1] != "A" else "B"
    return {
        "right key": key,
        "unknown id": f"{secrets.token_hex(8)}.{secrets.token_urlsafe(32)}",
        "wrong secret": f"{key_id}.{secrets.token_urlsafe(32)}",
        "last char wrong": f"{key_id}.{secret[:-1]}{last}",
        "malformed": key_id,
    }


def measure(n: int, prefix: str | None = None) -> dict[str, list[float]]:
    """Each kind of key's answer times, `n` requests each, on a prefix of its own (default: a random
    bench-keys-*), deleted afterwards."""
    from ddm.schema.settings import Settings
    from ddm.webui.app import create_app
    from ddm.webui.config import UIConfig
    from ddm.webui.keys import KeyStore

    prefix = prefix or f"bench-keys-{secrets.token_hex(4)}:"
    settings = dataclasses.replace(Settings.from_env(), prefix=prefix)
    app = create_app(config=UIConfig(settings=settings, jobs_per_minute=100_000))
    state = app.extensions["ddm"]
    try:
        keys = _keys(KeyStore(state.redis, settings.names))
        http = app.test_client()
        path = f"/api/jobs/{secrets.token_hex(16)}"
        order = [kind for kind in KINDS for _ in range(n)]
        random.Random(0).shuffle(order)
        times: dict[str, list[float]] = {kind: [] for kind in KINDS}
        for kind in KINDS:  # warm every path once
            http.get(path, headers={"Authorization": f"Bearer {keys[kind]}"})
        for kind in order:
            headers = {"Authorization": f"Bearer {keys[kind]}"}
            t0 = time.perf_counter()
            status = http.get(path, headers=headers).status_code
            times[kind].append(time.perf_counter() - t0)
            assert status == (404 if kind == "right key" else 401), (kind, status)
        return times
    finally:
        for name in state.redis.scan_iter(match=f"{settings.prefix}*"):
            state.redis.delete(name)
        state.close()


def report(times: dict[str, list[float]]) -> None:
    print("| key | median ms | p10 ms | p90 ms | median - unknown id's, ms |")
    print("|---|---|---|---|---|")
    base = statistics.median(times["unknown id"])
    for kind, ts in times.items():
        q = statistics.quantiles(ts, n=10)
        med = statistics.median(ts)
        print(
            f"| {kind} | {med * 1e3:.3f} | {q[0] * 1e3:.3f} | {q[-1] * 1e3:.3f} | {(med - base) * 1e3:+.3f} |"
        )
    wrong = [times[k] for k in ("unknown id", "wrong secret", "last char wrong")]
    meds = [statistics.median(ts) for ts in wrong]
    spread = statistics.median(
        [statistics.quantiles(ts, n=4)[2] - statistics.quantiles(ts, n=4)[0] for ts in wrong]
    )
    # a median's standard error, for roughly normal times: 1.2533 sigma / sqrt(n), sigma ~ IQR / 1.349
    stderr = 1.2533 * (spread / 1.349) / len(wrong[0]) ** 0.5
    print(
        f"\nthe three wrong keys: medians within {(max(meds) - min(meds)) * 1e3:.3f} ms of each other; "
        f"one request's interquartile range {spread * 1e3:.3f} ms, a median's standard error about "
        f"{stderr * 1e3:.3f} ms ({len(wrong[0])} requests each)"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="requests per kind of key")
    report(measure(parser.parse_args(argv).n))


if __name__ == "__main__":
    main()
