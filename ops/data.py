"""Datasets and splits: the IDX reader, the table of known datasets, lookup, loading and download.

A split is named like Python slicing on the official split: "test", "train", "test[:8000]",
"test[8000:]", "test[100:200]". Offline, the convention is to train on test[:8000] and evaluate on
test[8000:] (the 60k MNIST training split is not shipped with the workspace).

Files are checked twice over: a download must match the md5 of the official archive; a file found
on disk must match the md5 of the official *decompressed* payload (so a re-gzipped or unpacked
copy of the right data is accepted, and, say, Fashion-MNIST files sitting where MNIST is expected
are refused instead of silently training on the wrong data).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import tempfile
import urllib.error
import urllib.request
import zlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from ddm.schema.errors import ConfigError, expected
from ddm.schema.flow import NUM_CLASSES, pad_to_32

# ---------------------------------------------------------------------------------------------
# IDX format
# ---------------------------------------------------------------------------------------------

GZIP_MAGIC = b"\x1f\x8b"

# IDX type code -> big-endian numpy dtype (the format stores every multi-byte number big-endian).
IDX_DTYPES: dict[int, str] = {
    0x08: "u1",
    0x09: "i1",
    0x0B: ">i2",
    0x0C: ">i4",
    0x0D: ">f4",
    0x0E: ">f8",
}


def read_raw(path: str | Path) -> bytes:
    """The bytes of a file, gunzipped when it starts with the gzip magic (the name does not matter)."""
    path = Path(path)
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if blob[:2] != GZIP_MAGIC:
        return blob
    try:
        return gzip.decompress(blob)
    except (OSError, EOFError, zlib.error) as exc:
        raise ConfigError(
            f"{path}: {expected('a complete gzip stream', f'a corrupt or truncated one ({exc})')}"
        ) from exc


def parse_idx(raw: bytes, source: str = "<bytes>") -> np.ndarray:
    """Decode an IDX payload (already gunzipped) into an array with native byte order.

    Layout: 2 zero bytes, 1 type-code byte, 1 byte ndim, ndim big-endian uint32 sizes, then the data.
    """
    if len(raw) < 4:
        raise ConfigError(f"{source}: {expected('an IDX header of at least 4 bytes', f'{len(raw)} bytes')}")
    if raw[0] != 0 or raw[1] != 0:
        raise ConfigError(f"{source}: {expected('IDX magic starting with 0x00 0x00', raw[:4].hex(' '))}")
    code, ndim = raw[2], raw[3]
    if code not in IDX_DTYPES:
        codes = ", ".join(f"0x{c:02X}" for c in IDX_DTYPES)
        raise ConfigError(f"{source}: {expected(f'an IDX type code in ({codes})', f'0x{code:02X}')}")
    if ndim < 1:
        raise ConfigError(f"{source}: {expected('at least 1 dimension', ndim)}")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ConfigError(f"{source}: {expected(f'{header} header bytes for {ndim} dims', len(raw))}")
    dims = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    dtype = np.dtype(IDX_DTYPES[code])
    want = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    got = len(raw) - header
    if got != want:
        raise ConfigError(
            f"{source}: {expected(f'{want} payload bytes for shape {dims} of {dtype.name}', got)}"
            + (" (truncated file?)" if got < want else " (trailing bytes)")
        )
    arr = np.frombuffer(raw, dtype=dtype, offset=header).reshape(dims)
    return arr.astype(dtype.newbyteorder("="), copy=True)


def read_idx(path: str | Path) -> np.ndarray:
    """Read an IDX file, gzip or plain (detected by magic bytes, not by the extension)."""
    return parse_idx(read_raw(path), str(path))


# ---------------------------------------------------------------------------------------------
# The table of datasets
# ---------------------------------------------------------------------------------------------


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


# Decompressed md5s were checked here against /work/shared/data/mnist (test split) and the Debian
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
            "offline, point at the MNIST test split shipped with the workspace: "
            "DDM_DATA_DIR=../shared/data (or --data-dir ../shared/data), then train on "
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

SPLITS = ("train", "test")


def get_spec(name: str) -> DatasetSpec:
    if name not in DATASETS:
        raise ConfigError(expected(f"a dataset in {sorted(DATASETS)}", name))
    return DATASETS[name]


# ---------------------------------------------------------------------------------------------
# Splits
# ---------------------------------------------------------------------------------------------

_SPLIT_RE = re.compile(r"^(train|test)(?:\[(\d*):(\d*)\])?$")
_SPLIT_EXAMPLE = "'test', 'train', 'test[:8000]', 'test[8000:]' or 'test[100:200]'"


def parse_split(spec: str) -> tuple[str, int, int | None]:
    """Parse a split spec into (split, start, stop).

    'test[:8000]' -> ('test', 0, 8000); 'test[8000:]' -> ('test', 8000, None); 'train' -> ('train', 0, None).
    stop=None means "to the end"; bounds are checked against the data in load_dataset.
    """
    m = _SPLIT_RE.match(spec.strip()) if isinstance(spec, str) else None
    if m is None:
        raise ConfigError(expected(f"a split like {_SPLIT_EXAMPLE}", spec))
    split, start_s, stop_s = m.groups()
    start = int(start_s) if start_s else 0
    stop = int(stop_s) if stop_s else None
    if stop is not None and stop <= start:
        raise ConfigError(expected(f"a non-empty range (start < stop) like {_SPLIT_EXAMPLE}", spec))
    return split, start, stop


def format_split(split: str, start: int, stop: int, total: int) -> str:
    """Canonical spelling of a resolved split: bounds equal to the defaults are left out."""
    if start == 0 and stop == total:
        return split
    return f"{split}[{start if start else ''}:{stop if stop != total else ''}]"


# ---------------------------------------------------------------------------------------------
# Data directory and file lookup
# ---------------------------------------------------------------------------------------------


def resolve_data_dir(flag: str | Path | None = None) -> Path:
    """The data directory: the flag, else $DDM_DATA_DIR, else ./data."""
    if flag:
        return Path(flag).expanduser()
    env = os.environ.get("DDM_DATA_DIR")
    if env:
        return Path(env).expanduser()
    return Path("data")


def search_dirs(name: str, data_dir: Path) -> list[Path]:
    """Where files of a dataset are looked for, in order."""
    spec = get_spec(name)
    return [data_dir / name, data_dir, *(Path(d) for d in spec.offline_dirs)]


def _find_file(df: DataFile, directory: Path) -> Path | None:
    for candidate in (directory / df.name, directory / df.raw_name):
        if candidate.is_file():
            return candidate
    return None


def find_split_files(name: str, split: str, data_dir: Path) -> tuple[Path, Path]:
    """(images path, labels path) of a split, both from the first directory holding both."""
    spec = get_spec(name)
    if split not in spec.files:
        raise ConfigError(expected(f"a split in {SPLITS}", split))
    images_df, labels_df = spec.files[split]
    dirs = search_dirs(name, data_dir)
    for d in dirs:
        images, labels = _find_file(images_df, d), _find_file(labels_df, d)
        if images is not None and labels is not None:
            return images, labels
    looked = ", ".join(str(d) for d in dirs)
    raise ConfigError(
        f"{name} {split} files ({images_df.name}, {labels_df.name}, gzipped or not) not found; looked in "
        f"{looked}. With a network: `ddm data fetch {name} --data-dir {data_dir}`; {spec.offline_hint}."
    )


# ---------------------------------------------------------------------------------------------
# Datasets
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Dataset:
    """A loaded split: images uint8 [N, 28, 28], labels int64 [N] (both read-only).

    `split` is canonical ("test[:8000]", "test"); together with `name` and the bytes it makes `sha256`,
    which a partition manifest records so training refuses data other than what was partitioned.
    """

    name: str
    split: str
    images: np.ndarray
    labels: np.ndarray

    def __post_init__(self) -> None:
        images, labels = self.images, self.labels
        if images.dtype != np.uint8 or images.ndim != 3 or images.shape[1:] != (28, 28):
            raise ConfigError(expected("images uint8 [N, 28, 28]", f"{images.dtype} {images.shape}"))
        if labels.ndim != 1 or labels.shape[0] != images.shape[0]:
            raise ConfigError(expected(f"labels [N={images.shape[0]}]", labels.shape))
        labels = labels.astype(np.int64)
        if labels.size and (labels.min() < 0 or labels.max() >= NUM_CLASSES):
            raise ConfigError(
                expected(f"labels in [0, {NUM_CLASSES})", (int(labels.min()), int(labels.max())))
            )
        images = np.array(images, copy=True)
        images.setflags(write=False)
        labels.setflags(write=False)
        object.__setattr__(self, "images", images)
        object.__setattr__(self, "labels", labels)

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @cached_property
    def sha256(self) -> str:
        """Hex sha256 of name, split, shape, image bytes and labels (int64 little-endian)."""
        h = hashlib.sha256()
        h.update(b"ddm-dataset-v1\0")
        h.update(self.name.encode() + b"\0" + self.split.encode() + b"\0")
        h.update(str(self.images.shape).encode() + b"\0")
        h.update(np.ascontiguousarray(self.images).tobytes())
        h.update(self.labels.astype("<i8").tobytes())
        return h.hexdigest()

    @property
    def classes(self) -> tuple[str, ...]:
        spec = DATASETS.get(self.name)
        return spec.classes if spec else tuple(str(c) for c in range(NUM_CLASSES))

    def label_counts(self) -> np.ndarray:
        """int64 [10]: samples per class."""
        return label_histogram(self.labels)

    def as_model_input(self) -> np.ndarray:
        """float32 [N, 1, 32, 32] in [-1, 1] (zero border = -1), the UNet's input layout."""
        return pad_to_32(self.images)


def label_histogram(labels: np.ndarray) -> np.ndarray:
    """int64 [10]: how many of each class in a label array."""
    return np.bincount(np.asarray(labels, dtype=np.int64), minlength=NUM_CLASSES).astype(np.int64)


def md5_hex(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def _load_checked(path: Path, df: DataFile, verify: bool) -> np.ndarray:
    raw = read_raw(path)
    if verify:
        got = md5_hex(raw)
        if got != df.raw_md5:
            raise ConfigError(
                f"{path}: {expected(f'the official {df.raw_name} (decompressed md5 {df.raw_md5})', got)}; "
                "the file is corrupt or belongs to another dataset - remove it and fetch again"
            )
    return parse_idx(raw, str(path))


def load_dataset(
    name: str, split_spec: str, data_dir: str | Path | None = None, *, verify: bool = True
) -> Dataset:
    """Load a split of a known dataset, e.g. load_dataset("mnist", "test[:8000]").

    data_dir=None resolves through resolve_data_dir (flag, $DDM_DATA_DIR, ./data). With verify (the
    default) the decompressed files must match the official md5s.
    """
    get_spec(name)
    split, start, stop = parse_split(split_spec)
    spec = DATASETS[name]
    images_path, labels_path = find_split_files(name, split, resolve_data_dir(data_dir))
    images_df, labels_df = spec.files[split]
    images = _load_checked(images_path, images_df, verify)
    labels = _load_checked(labels_path, labels_df, verify)
    if images.ndim != 3 or images.shape[1:] != (28, 28) or images.dtype != np.uint8:
        raise ConfigError(
            f"{images_path}: {expected('uint8 images [N, 28, 28]', f'{images.dtype} {images.shape}')}"
        )
    if labels.ndim != 1 or labels.shape[0] != images.shape[0]:
        raise ConfigError(f"{labels_path}: {expected(f'{images.shape[0]} labels [N]', labels.shape)}")
    total = images.shape[0]
    stop = total if stop is None else stop
    if start >= total or stop > total:
        raise ConfigError(expected(f"a range inside {split}[0:{total}]", split_spec))
    return Dataset(
        name=name,
        split=format_split(split, start, stop, total),
        images=images[start:stop],
        labels=labels[start:stop].astype(np.int64),
    )


# ---------------------------------------------------------------------------------------------
# Download
# ---------------------------------------------------------------------------------------------


def file_is_valid(path: Path, df: DataFile) -> bool:
    """True when the file is the official archive, or any gzip/plain copy with the official payload."""
    try:
        blob = path.read_bytes()
    except OSError:
        return False
    if md5_hex(blob) == df.archive_md5:
        return True
    try:
        raw = gzip.decompress(blob) if blob[:2] == GZIP_MAGIC else blob
    except (OSError, EOFError, zlib.error):
        return False
    return md5_hex(raw) == df.raw_md5


def download(url: str, dest: Path, md5: str, *, timeout: float = 30.0, offline_hint: str = "") -> None:
    """Stream url to a temp file next to dest, check its md5, then move it into place (atomic)."""
    from tqdm import tqdm

    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=dest.name + ".", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        digest = hashlib.md5(usedforsecurity=False)
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp, os.fdopen(fd, "wb") as out:
                total = int(resp.headers.get("Content-Length") or 0) or None
                with tqdm(total=total, unit="B", unit_scale=True, desc=dest.name, leave=False) as bar:
                    while chunk := resp.read(1 << 16):
                        out.write(chunk)
                        digest.update(chunk)
                        bar.update(len(chunk))
        except urllib.error.HTTPError as exc:
            raise ConfigError(f"download of {url} failed: HTTP {exc.code} {exc.reason}") from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            hint = f"; {offline_hint}" if offline_hint else ""
            raise ConfigError(f"no network: could not download {url} ({reason}){hint}") from exc
        got = digest.hexdigest()
        if got != md5:
            raise ConfigError(f"{url}: {expected(f'md5 {md5}', got)}; the download is corrupt, try again")
        os.replace(tmp, dest)
    finally:
        if tmp.exists():
            tmp.unlink()


def fetch(
    name: str,
    data_dir: str | Path | None = None,
    splits: tuple[str, ...] = SPLITS,
    *,
    timeout: float = 30.0,
) -> list[Path]:
    """Download the official files of `name` into <data_dir>/<name>/, skipping valid ones already there.

    A file counts as present if a valid copy is anywhere ddm looks (the data directory, its
    <name>/ folder, or the dataset's offline location). Returns the paths now usable, one per file.
    """
    spec = get_spec(name)
    root = resolve_data_dir(data_dir)
    target = root / name
    for split in splits:
        if split not in spec.files:
            raise ConfigError(expected(f"splits from {SPLITS}", split))
    paths: list[Path] = []
    for split in splits:
        for df in spec.files[split]:
            found = None
            for d in search_dirs(name, root):
                p = _find_file(df, d)
                if p is not None and file_is_valid(p, df):
                    found = p
                    break
                if p is not None:
                    print(f"{p}: checksum does not match the official {df.name}; ignoring it")
            if found is not None:
                print(f"{df.name}: present and valid at {found}")
                paths.append(found)
                continue
            dest = target / df.name
            print(f"{df.name}: downloading {spec.base_url}{df.name}")
            download(
                spec.base_url + df.name, dest, df.archive_md5, timeout=timeout, offline_hint=spec.offline_hint
            )
            print(f"{df.name}: ok (md5 {df.archive_md5}) -> {dest}")
            paths.append(dest)
    return paths
