"""Where the CPU goes in a profiled `ddm bench` run: a summary of py-spy's raw output, by process.

    python -m ddm.ops.bench.profile_summary router=R.txt expert1=E1.txt ... --rate 100 --wall-s 15

Each NAME=FILE is `py-spy record --pid P --format raw --rate R --duration D` of one process of a
running bench (ops/bench/profile_wan.sh): one line per distinct stack, "frame;frame;... COUNT", on-CPU
samples only (py-spy leaves idle threads out by default). Stacks through the link proxies (the
simulated WAN, ops/netsim/proxy.py: threads of the bench process) are counted apart. For each: its
samples as CPU seconds and as a share of one core over the window, and the functions it spent them in
(the innermost frame: self time).
"""

from __future__ import annotations

import argparse
import re
from collections import Counter, defaultdict
from pathlib import Path

_LINE = re.compile(r"^(?P<stack>.*) (?P<count>\d+)$")


def summarize(name: str, text: str) -> dict[str, Counter]:
    """{name (or "link proxies"): Counter of innermost frames (samples)} of one process's profile."""
    out: dict[str, Counter] = defaultdict(Counter)
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        frames = [f for f in m.group("stack").split(";") if f and not f.startswith("process ")]
        if frames:
            part = "link proxies (threads of the bench)" if any("proxy.py" in f for f in frames) else name
            out[part][frames[-1]] += int(m.group("count"))
    return out


def report(by_role: dict[str, Counter], rate: float, wall_s: float, top: int = 8) -> str:
    lines = []
    for name, frames in sorted(by_role.items(), key=lambda kv: -sum(kv[1].values())):
        total = sum(frames.values())
        cpu_s = total / rate
        lines.append(f"{name}: {cpu_s:.1f} CPU s, {cpu_s / wall_s:.0%} of one core over {wall_s:.0f} s")
        for frame, n in frames.most_common(top):
            lines.append(f"  {n / total:5.1%}  {frame}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("profiles", nargs="+", metavar="NAME=FILE", help="py-spy --format raw output per process")
    p.add_argument("--rate", type=float, default=100.0, help="py-spy's --rate (samples per second)")
    p.add_argument("--wall-s", type=float, required=True, help="how long each process was sampled")
    p.add_argument("--top", type=int, default=8, help="functions listed per process")
    args = p.parse_args(argv)
    by_role: dict[str, Counter] = {}
    for spec in args.profiles:
        name, _, path = spec.partition("=")
        if not path:
            raise SystemExit(f"expected NAME=FILE, got {spec!r}")
        by_role.update(summarize(name, Path(path).read_text()))
    print(report(by_role, args.rate, args.wall_s, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
