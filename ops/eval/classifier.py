"""The evaluation classifier (PyTorch): class accuracy of generated digits, and the penultimate
features whose Frechet distance compares generated and real images (an FID-like score for 32x32
grayscale, where Inception features would mean little)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.numpy import load_file, save_file
from torch import nn
from tqdm import tqdm

from ddm.ops.data.dataset import Dataset
from ddm.schema.checkpoint_meta import read_meta, utc_now, write_meta
from ddm.schema.errors import ConfigError, expected
from ddm.workers.training import FitOptions

FEATURE_DIM = 256
WEIGHTS = "model.safetensors"
CLASSIFIER_FIT = FitOptions(epochs=15, batch=128)  # train_classifier's default


class Classifier(nn.Module):
    """x [B,C,S,S] in [-1,1] -> logits [B,K]; features() gives the penultimate [B,256]. C, S, K: the
    dataset's sample space (1, 32, 10 for MNIST: the defaults, what a checkpoint without them means)."""

    def __init__(self, in_channels: int = 1, num_classes: int = 10, image_size: int = 32):
        super().__init__()
        self.shape = {"in_channels": in_channels, "num_classes": num_classes, "image_size": image_size}
        self.c1 = nn.Conv2d(in_channels, 32, 3, padding=1)
        self.c2 = nn.Conv2d(32, 32, 3, padding=1)
        self.c3 = nn.Conv2d(32, 64, 3, padding=1)
        self.c4 = nn.Conv2d(64, 64, 3, padding=1)
        self.fc = nn.Linear(64 * (image_size // 4) ** 2, FEATURE_DIM)
        self.out = nn.Linear(FEATURE_DIM, num_classes)
        self.drop = nn.Dropout(0.3)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        h = F.max_pool2d(F.relu(self.c2(F.relu(self.c1(x)))), 2)  # [B, 32, S/2, S/2]
        h = F.max_pool2d(F.relu(self.c4(F.relu(self.c3(h)))), 2)  # [B, 64, S/4, S/4]
        return F.relu(self.fc(h.flatten(1)))  # [B, 256]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.drop(self.features(x)))


def augment(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Random shifts of up to 2 pixels (the border is background, -1); x [N, C, H, W]."""
    out = np.full_like(x, -1.0)
    h, w = x.shape[2:]
    for i, (dy, dx) in enumerate(rng.integers(-2, 3, size=(len(x), 2))):
        out[i, :, max(dy, 0) : h + min(dy, 0), max(dx, 0) : w + min(dx, 0)] = x[
            i, :, max(-dy, 0) : h + min(-dy, 0), max(-dx, 0) : w + min(-dx, 0)
        ]
    return out


def train_classifier(
    train: Dataset,
    test: Dataset,
    out_dir: Path,
    *,
    fit: FitOptions = CLASSIFIER_FIT,
) -> dict:
    """Train on `train`, score on `test`: a checkpoint in out_dir with its test accuracy in meta.json."""
    t0 = time.perf_counter()
    model = fit_classifier(
        train.as_model_input(), np.asarray(train.labels), fit, num_classes=len(train.classes)
    )
    test_images = test.as_model_input()
    accuracy = float((predict(model, test_images).argmax(1) == np.asarray(test.labels)).mean())
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file({k: v.numpy().copy() for k, v in model.state_dict().items()}, str(out_dir / WEIGHTS))
    meta = {
        "kind": "classifier",
        "framework": "torch",
        "dataset": train.name,
        "split": train.split,
        "eval_split": test.split,
        "data_sha256": train.sha256,
        "created": utc_now(),
        **fit.record(),  # epochs, batch, lr
        "steps": fit.length("epochs") * (len(train) // fit.batch),
        "wall_time_s": round(time.perf_counter() - t0, 1),
        "test_accuracy": accuracy,
        "num_test": len(test),
        **model.shape,  # in_channels, num_classes, image_size: the sample space it reads
    }
    write_meta(out_dir, meta)
    return meta


def fit_classifier(
    images: np.ndarray, labels: np.ndarray, fit: FitOptions, num_classes: int = 10
) -> Classifier:
    """images f32 [N,C,S,S], labels i64 [N] in 0..num_classes-1 -> the trained classifier (eval mode)."""
    torch.manual_seed(fit.seed)
    model = Classifier(images.shape[1], num_classes, images.shape[2])

    def loss(idx: np.ndarray, rng: np.random.Generator) -> torch.Tensor:
        x = torch.from_numpy(augment(images[idx], rng))
        return F.cross_entropy(model(x), torch.from_numpy(labels[idx]))

    fit_epochs(model, loss, len(images), fit, "classifier")
    return model.eval()


def fit_epochs(model: nn.Module, loss, n: int, fit: FitOptions, desc: str) -> None:
    """AdamW under a one-cycle schedule, fit's epochs (passes over n rows) in shuffled batches:
    loss(idx, rng) -> the batch's loss tensor. desc: the progress bar's name (shown when fit.progress)."""
    epochs, batch, lr = fit.length("epochs"), fit.batch, fit.lr
    rng = np.random.default_rng(fit.seed)
    steps = epochs * (n // batch)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps)
    bar = tqdm(total=steps, desc=desc, disable=not fit.progress)
    for _ in range(epochs):
        order = rng.permutation(n)
        for s in range(n // batch):
            value = loss(order[s * batch : (s + 1) * batch], rng)
            opt.zero_grad(set_to_none=True)
            value.backward()
            opt.step()
            sched.step()
            bar.update(1)
            bar.set_postfix(loss=f"{value.item():.3f}")
    bar.close()


@torch.inference_mode()
def predict(model: Classifier, x: np.ndarray, batch: int = 256) -> np.ndarray:
    """Logits f32 [N, K]."""
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
    meta = read_meta(path, kind="classifier")
    if not (path / WEIGHTS).is_file():
        raise ConfigError(
            expected(f"a classifier checkpoint (meta.json + {WEIGHTS}) at {path}", "missing files")
        )
    shape = {k: int(meta[k]) for k in ("in_channels", "num_classes", "image_size") if k in meta}
    model = Classifier(**shape)  # a checkpoint before the fields: 1x32x32, 10 classes
    model.load_state_dict({k: torch.from_numpy(v) for k, v in load_file(str(path / WEIGHTS)).items()})
    return model.eval(), meta


def eval_classifier(deployment_path: str | Path, asked: str | Path | None) -> tuple[Path, Classifier, dict]:
    """(path, model, meta) of the classifier a deployment is scored by: `asked`, else the one its folder
    ships as `classifier` (checkpoints/emoji-latent's is a link to the emoji one: its pictures are emoji).
    A deployment that ships none is named, with what to pass, before anything is sampled."""
    path = Path(asked) if asked is not None else Path(deployment_path).parent / "classifier"
    if asked is None and not path.exists():
        raise ConfigError(
            f"deployment {deployment_path} ships no evaluation classifier (no {path}): pass --classifier "
            "DIR, one trained on the data its pictures are of (`ddm train classifier`)"
        )
    model, meta = load_classifier(path)
    return path, model, meta


def held_out_split(meta: dict, asked: str | None) -> str:
    """The real images FD compares against: `asked`, else the held-out split the classifier was measured
    on (its meta's eval_split: MNIST's test[8000:], emoji's and Fashion-MNIST's test)."""
    return asked or meta.get("eval_split") or "test"


def fd_warning(metrics: dict) -> str | None:
    """A warning when two halves of real images score a larger FD than the model (small-sample bias
    dominates: n is too small to rank anything by FD); None otherwise."""
    floor, fd = metrics.get("fd_real_vs_real"), metrics.get("fd")
    if floor is None or fd is None or floor <= fd:
        return None
    return (
        f"warning: FD real vs real ({floor:.1f}, two halves of {metrics.get('fd_real_vs_real_n')} real "
        f"images) is above the model's ({fd:.1f}): n is too small for FD to mean anything here; "
        "raise --n (or --total)"
    )
