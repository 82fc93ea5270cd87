"""The evaluation classifier (PyTorch): class accuracy of generated digits, and the penultimate
features whose Frechet distance compares generated and real images (an FID-like score for 32x32
grayscale, where Inception features would mean little)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.numpy import load_file, save_file
from torch import nn
from tqdm import tqdm

from ddm.schema.errors import ConfigError, expected
from ddm.workers.training import write_json_atomic

FEATURE_DIM = 256
WEIGHTS = "model.safetensors"


class Classifier(nn.Module):
    """x [B,1,32,32] in [-1,1] -> logits [B,10]; features() gives the penultimate [B,256]."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 32, 3, padding=1)
        self.c2 = nn.Conv2d(32, 32, 3, padding=1)
        self.c3 = nn.Conv2d(32, 64, 3, padding=1)
        self.c4 = nn.Conv2d(64, 64, 3, padding=1)
        self.fc = nn.Linear(64 * 8 * 8, FEATURE_DIM)
        self.out = nn.Linear(FEATURE_DIM, 10)
        self.drop = nn.Dropout(0.3)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        h = F.max_pool2d(F.relu(self.c2(F.relu(self.c1(x)))), 2)  # [B, 32, 16, 16]
        h = F.max_pool2d(F.relu(self.c4(F.relu(self.c3(h)))), 2)  # [B, 64, 8, 8]
        return F.relu(self.fc(h.flatten(1)))  # [B, 256]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.drop(self.features(x)))


def augment(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Random shifts of up to 2 pixels (the border is background, -1)."""
    out = np.full_like(x, -1.0)
    for i, (dy, dx) in enumerate(rng.integers(-2, 3, size=(len(x), 2))):
        out[i, :, max(dy, 0) : 32 + min(dy, 0), max(dx, 0) : 32 + min(dx, 0)] = x[
            i, :, max(-dy, 0) : 32 + min(-dy, 0), max(-dx, 0) : 32 + min(-dx, 0)
        ]
    return out


def train_classifier(
    images,
    labels,
    test_images,
    test_labels,
    out_dir: Path,
    meta: dict,
    *,
    epochs: int = 15,
    batch: int = 128,
    lr: float = 2e-3,
    seed: int = 0,
    progress: bool = True,
) -> dict:
    """images f32 [N,1,32,32], labels i64 [N] -> checkpoint in out_dir with its test accuracy in meta.json."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = Classifier()
    steps = epochs * (len(images) // batch)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps)
    t0 = time.perf_counter()
    bar = tqdm(total=steps, desc="classifier", disable=not progress)
    for _ in range(epochs):
        order = rng.permutation(len(images))
        for s in range(len(images) // batch):
            idx = order[s * batch : (s + 1) * batch]
            x = torch.from_numpy(augment(images[idx], rng))
            loss = F.cross_entropy(model(x), torch.from_numpy(labels[idx]))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}")
    bar.close()
    model.eval()
    pred = predict(model, test_images).argmax(1)
    accuracy = float((pred == test_labels).mean())
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file({k: v.numpy().copy() for k, v in model.state_dict().items()}, str(out_dir / WEIGHTS))
    final = {
        **meta,
        "kind": "classifier",
        "framework": "torch",
        "epochs": epochs,
        "batch": batch,
        "lr": lr,
        "steps": steps,
        "wall_time_s": round(time.perf_counter() - t0, 1),
        "test_accuracy": accuracy,
        "num_test": int(len(test_images)),
    }
    write_json_atomic(out_dir / "meta.json", final)
    return final


@torch.inference_mode()
def predict(model: Classifier, x: np.ndarray, batch: int = 256) -> np.ndarray:
    """Logits f32 [N, 10]."""
    return np.concatenate(
        [model(torch.from_numpy(x[s : s + batch])).numpy() for s in range(0, len(x), batch)]
    )


@torch.inference_mode()
def features(model: Classifier, x: np.ndarray, batch: int = 256) -> np.ndarray:
    """Penultimate features f64 [N, 256] (float64 for the covariance)."""
    chunks = [model.features(torch.from_numpy(x[s : s + batch])).numpy() for s in range(0, len(x), batch)]
    return np.concatenate(chunks).astype(np.float64)


def load_classifier(path: str | Path) -> tuple[Classifier, dict]:
    path = Path(path)
    meta_path = path / "meta.json"
    if not meta_path.is_file() or not (path / WEIGHTS).is_file():
        raise ConfigError(
            expected(f"a classifier checkpoint (meta.json + {WEIGHTS}) at {path}", "missing files")
        )
    meta = json.loads(meta_path.read_text())
    if meta.get("kind") != "classifier":
        raise ConfigError(expected(f"{meta_path} with kind = classifier", meta.get("kind")))
    model = Classifier()
    model.load_state_dict({k: torch.from_numpy(v) for k, v in load_file(str(path / WEIGHTS)).items()})
    return model.eval(), meta


def frechet_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Frechet distance between Gaussians fitted to feature sets a [N, D] and b [M, D].

    |mu_a - mu_b|^2 + Tr(S_a + S_b - 2 (S_a^1/2 S_b S_a^1/2)^1/2), with symmetric square roots by
    eigendecomposition (numerically kinder than a general sqrtm, and numpy only).
    """
    mu_a, mu_b = a.mean(0), b.mean(0)
    s_a, s_b = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    w, v = np.linalg.eigh(s_a)
    root_a = (v * np.sqrt(np.clip(w, 0, None))) @ v.T
    cross = np.linalg.eigvalsh(root_a @ s_b @ root_a)
    return float(
        ((mu_a - mu_b) ** 2).sum()
        + np.trace(s_a)
        + np.trace(s_b)
        - 2 * np.sqrt(np.clip(cross, 0, None)).sum()
    )
