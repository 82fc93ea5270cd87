"""The datasets ddm knows: official file names, their md5s, class names, where to find them offline.

Two sources: "idx" datasets (MNIST, Fashion-MNIST) are official files, downloaded or found on disk;
"render" datasets (emoji, emoji-64) are drawn from two Debian packages into the data directory
(ddm.ops.data.emoji_cache) and have no files to download.

Files are checked twice over: a download must match the md5 of the official archive; a file found
on disk must match the md5 of the official *decompressed* payload (so a re-gzipped or unpacked
copy of the right data is accepted, and, say, Fashion-MNIST files sitting where MNIST is expected
are refused instead of silently training on the wrong data).
"""

from __future__ import annotations

from dataclasses import dataclass

from ddm.ops.data.emoji_cache import APT_INSTALL
from ddm.ops.data.emoji_list import GROUPS
from ddm.schema.errors import ConfigError, expected


@dataclass(frozen=True)
class DataFile:
    """One official file: archive name, md5 of the .gz as served, md5 of the decompressed IDX."""

    name: str
    archive_md5: str
    raw_md5: str

    @property
    def raw_name(self) -> str:
        return self.name.removesuffix(".gz")


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    base_url: str
    files: dict[str, tuple[DataFile, DataFile]]  # split -> (images, labels)
    classes: tuple[str, ...]
    offline_dirs: tuple[str, ...]
    offline_hint: str
    source: str = "idx"  # "idx": official files; "render": drawn from system packages (emoji_cache)
    image_shape: tuple[int, ...] = (28, 28)  # one image in Dataset.images: [H, W] or [C, H, W]


# Decompressed md5s were checked against an offline copy of the MNIST test split and the Debian
# package dataset-fashion-mnist (all four files); both ship re-compressed .gz files whose archive
# md5 differs from the official one while the payload is identical.
DATASETS: dict[str, DatasetSpec] = {
    "mnist": DatasetSpec(
        name="mnist",
        base_url="https://ossci-datasets.s3.amazonaws.com/mnist/",
        files={
            "train": (
                DataFile(
                    "train-images-idx3-ubyte.gz",
                    "f68b3c2dcbeaaa9fbdd348bbdeb94873",
                    "6bbc9ace898e44ae57da46a324031adb",
                ),
                DataFile(
                    "train-labels-idx1-ubyte.gz",
                    "d53e105ee54ea40749a09fcbcd1e9432",
                    "a25bea736e30d166cdddb491f175f624",
                ),
            ),
            "test": (
                DataFile(
                    "t10k-images-idx3-ubyte.gz",
                    "9fb629c4189551a2d022fa330f9573f3",
                    "2646ac647ad5339dbf082846283269ea",
                ),
                DataFile(
                    "t10k-labels-idx1-ubyte.gz",
                    "ec29112dd5afa0611ce80d1b7f02629c",
                    "27ae3e4e09519cfbb04c329615203637",
                ),
            ),
        },
        classes=tuple(str(d) for d in range(10)),
        offline_dirs=(),
        offline_hint=(
            "offline, point DDM_DATA_DIR (or --data-dir) at a folder that holds mnist/ with the "
            "test split (t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz), then train on "
            "--split 'test[:8000]' and evaluate on 'test[8000:]'"
        ),
    ),
    "fashion-mnist": DatasetSpec(
        name="fashion-mnist",
        base_url="http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
        files={
            "train": (
                DataFile(
                    "train-images-idx3-ubyte.gz",
                    "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
                    "f4a8712d7a061bf5bd6d2ca38dc4d50a",
                ),
                DataFile(
                    "train-labels-idx1-ubyte.gz",
                    "25c81989df183df01b3e8a0aad5dffbe",
                    "9018921c3c673c538a1fc5bad174d6f9",
                ),
            ),
            "test": (
                DataFile(
                    "t10k-images-idx3-ubyte.gz",
                    "bef4ecab320f06d8554ea6380940ec79",
                    "8181f5470baa50b63fa0f6fddb340f0a",
                ),
                DataFile(
                    "t10k-labels-idx1-ubyte.gz",
                    "bb300cfdad3c16e7a12a480ee83fd310",
                    "15d484375f8d13e6eb1aabb0c3f46965",
                ),
            ),
        },
        classes=(
            "T-shirt/top",
            "Trouser",
            "Pullover",
            "Dress",
            "Coat",
            "Sandal",
            "Shirt",
            "Sneaker",
            "Bag",
            "Ankle boot",
        ),
        offline_dirs=("/usr/share/datasets/fashion-mnist",),
        offline_hint=(
            "offline on Debian: `apt-get install -y dataset-fashion-mnist` puts the files in "
            "/usr/share/datasets/fashion-mnist, which ddm searches by itself"
        ),
    ),
}


def _emoji(name: str, size: int) -> DatasetSpec:
    return DatasetSpec(
        name=name,
        base_url="",
        files={},
        classes=GROUPS,
        offline_dirs=(),
        offline_hint=(
            f"the emoji are rendered here from two Debian packages (`{APT_INSTALL}`) into "
            f"DATA_DIR/emoji/ by `ddm data fetch {name}`; docs/DATA.md"
        ),
        source="render",
        image_shape=(3, size, size),
    )


# Colour emoji, 9 Unicode groups as labels; "train" and "test" are the held-out split by a hash of
# each base emoji (ddm.ops.data.emoji_list). Rendered, not downloaded: no files, no md5s.
DATASETS["emoji"] = _emoji("emoji", 32)
DATASETS["emoji-64"] = _emoji("emoji-64", 64)

SPLITS = ("train", "test")


def get_spec(name: str) -> DatasetSpec:
    if name not in DATASETS:
        raise ConfigError(expected(f"a dataset in {sorted(DATASETS)}", name))
    return DATASETS[name]
