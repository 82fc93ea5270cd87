"""ops/bench/profile_summary.py: py-spy raw stacks summarised by process, the link proxies apart."""

from __future__ import annotations

from ddm.ops.bench.profile_summary import main, report, summarize

RAW = """\
<module> (cli.py:1);run (router/worker.py:10);flush (router/scheduler.py:190) 30
<module> (cli.py:1);run (router/worker.py:10);send (redis/connection.py:1349) 10
not a stack line
"""
BENCH = """\
_bootstrap (threading.py:1);_loop (ops/netsim/proxy.py:200);select (selectors.py:468) 5
main (bench.py:1);wait (client.py:50) 15
"""


def test_samples_are_cpu_seconds_by_process_and_innermost_frame(tmp_path, capsys):
    by_role = {**summarize("router", RAW), **summarize("bench", BENCH)}
    assert by_role["router"]["flush (router/scheduler.py:190)"] == 30
    assert sum(by_role["link proxies (threads of the bench)"].values()) == 5
    assert sum(by_role["bench"].values()) == 15
    text = report(by_role, rate=100, wall_s=2.0)
    assert text.splitlines()[0] == "router: 0.4 CPU s, 20% of one core over 2 s"
    assert "  75.0%  flush (router/scheduler.py:190)" in text
    (tmp_path / "r.txt").write_text(RAW)
    assert main([f"router={tmp_path / 'r.txt'}", "--wall-s", "2"]) == 0
    assert "router: 0.4 CPU s" in capsys.readouterr().out
