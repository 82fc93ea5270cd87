"""ddm.ops.bench.cpu_busy: the busy share from two /proc/stat readings, and a run that keeps the
command's exit status."""

from __future__ import annotations

import sys

import pytest

from ddm.ops.bench.cpu_busy import busy_share, cpu_jiffies, main

# user nice system idle iowait irq softirq steal
BEFORE = "cpu  100 0 50 800 50 0 0 0\ncpu0 50 0 25 400 25 0 0 0\n"
AFTER = "cpu  400 0 150 1100 150 0 0 0\ncpu0 200 0 75 550 75 0 0 0\n"


def test_busy_share_counts_idle_and_iowait_as_not_busy(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    before.write_text(BEFORE)
    after.write_text(AFTER)
    assert cpu_jiffies(before) == (1000, 850)
    assert cpu_jiffies(after) == (1800, 1250)
    assert busy_share(cpu_jiffies(before), cpu_jiffies(after)) == pytest.approx(0.5)  # 400 of 800 idle
    assert busy_share((5, 5), (5, 5)) == 0.0
    after.write_text("intr 1 2 3\n")
    with pytest.raises(ValueError, match="starting 'cpu'"):
        cpu_jiffies(after)


def test_a_run_keeps_the_commands_exit_status_and_says_how_busy(capfd):
    assert main(["--", sys.executable, "-c", "import sys; sys.exit(3)"]) == 3
    said = capfd.readouterr().err
    assert "s wall, CPUs busy" in said and "exit status 3" in said
    assert main([]) == 2 and "usage:" in capfd.readouterr().err
