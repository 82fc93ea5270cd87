"""Download the official dataset files, md5-checked, skipping valid copies already on disk."""

from __future__ import annotations

import gzip
import hashlib
import urllib.error
import urllib.request
import zlib
from pathlib import Path

from ddm.ops.data.catalog import SPLITS, DataFile, get_spec
from ddm.ops.data.dataset import md5_hex
from ddm.ops.data.files import find_file, resolve_data_dir, search_dirs
from ddm.ops.data.idx import GZIP_MAGIC
from ddm.schema.atomic import atomic_path
from ddm.schema.errors import ConfigError, expected


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
    with atomic_path(dest) as tmp:
        digest = hashlib.md5(usedforsecurity=False)
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp, open(tmp, "wb") as out:
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
                p = find_file(df, d)
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
