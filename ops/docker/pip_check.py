"""`pip check` for an image built on someone else's base (the Neuron image): fail on what we broke.

AWS's Neuron images may ship with requirement conflicts of their own (a package of theirs asking for a
version of another that the image does not have). A plain `pip check` would then fail every build for
something we cannot fix, and `pip check || true` would hide what we break. So the build records the
base's problems before it installs anything and fails only on a problem that is new afterwards:

    python3 pip_check.py save /etc/ddm/pip-check-base.txt      # first, on the bare base image
    python3 pip_check.py compare /etc/ddm/pip-check-base.txt   # after our install: exit 1 if new

`compare` prints every problem, the base's ones marked as such, so the build log shows both. A line
that changed counts as new: a conflict of the base's whose versions our install moved is ours.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

CLEAN = "No broken requirements found."


def pip_check_problems() -> list[str]:
    """`python -m pip check`'s problem lines for this interpreter (empty when it finds none)."""
    out = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, check=False)
    lines = {line.strip() for line in (out.stdout + "\n" + out.stderr).splitlines()}
    return sorted(line for line in lines if line and line != CLEAN and not line.startswith("WARNING:"))


def new_problems(base: list[str], now: list[str]) -> list[str]:
    """The problems in `now` that `base` did not have."""
    known = set(base)
    return [line for line in now if line not in known]


def main(argv: list[str], check: Callable[[], list[str]] = pip_check_problems) -> int:
    if len(argv) != 2 or argv[0] not in ("save", "compare"):
        print("usage: pip_check.py save|compare FILE", file=sys.stderr)
        return 2
    command, path = argv[0], Path(argv[1])
    now = check()
    if command == "save":
        path.write_text("".join(f"{line}\n" for line in now), encoding="utf-8")
        for line in now:
            print(f"pip check (base image, before our install): {line}")
        return 0
    base = [line for line in path.read_text(encoding="utf-8").splitlines() if line]
    added = new_problems(base, now)
    for line in now:
        print(f"pip check: {line}{'' if line in added else '  (already in the base image)'}")
    if added:
        print(f"pip check: our install broke {len(added)} requirement(s), listed above", file=sys.stderr)
        return 1
    print(f"pip check: nothing new broken ({len(now)} problem(s) of the base image, none of ours)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
