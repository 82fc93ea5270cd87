"""Print constraints.txt with the versions this image already has put first (the Neuron image).

An accelerator base image brings its own builds of torch, numpy and friends, made for its driver and
compiler; reinstalling them at our pins could break it. So a package the image already has keeps its
version, and every other package gets the pin from constraints.txt:

    python3 image_constraints.py /etc/ddm/constraints.txt > /tmp/image-constraints.txt
    pip install -c /tmp/image-constraints.txt ...
"""

import re
import sys
from importlib.metadata import distributions
from pathlib import Path


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503


def main(path: str) -> None:
    installed = {canonical(d.metadata["Name"]): d.version for d in distributions() if d.metadata["Name"]}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        name, sep, _ = line.partition("==")
        if sep and canonical(name) in installed:
            line = f"{name}=={installed[canonical(name)]}"
        print(line)


if __name__ == "__main__":
    main(sys.argv[1])
