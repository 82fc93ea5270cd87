"""`ddm eval`: sample n images across labels from a deployment and score them honestly.

- class accuracy: the requested label vs what the evaluation classifier sees (per class and overall);
- FD: Frechet distance between the classifier's penultimate features of generated and held-out real
  images, with a bootstrap standard error and 95% interval (both image sets redrawn) and real-vs-real
  (two disjoint real halves of the same size) as the floor;
- cost: expert forward passes (image rows, guidance rows included) and seconds per image.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ddm.ops.eval.classifier import WEIGHTS as CLASSIFIER_WEIGHTS
from ddm.ops.eval.classifier import features, load_classifier, predict
from ddm.ops.eval.frechet import frechet_bootstrap, frechet_distance
from ddm.router.deployment_loader import load_experts, load_policy
from ddm.router.sampler import sample_local
from ddm.schema.checkpoint_meta import file_sha256, write_json_atomic
from ddm.schema.deployment import Deployment
from ddm.schema.messages import MAX_SAMPLES, JobSpec
from ddm.schema.resolved import ResolvedJob
from ddm.schema.strategy import Strategy


@dataclass(frozen=True)
class EvalRequest:
    """What `ddm eval` measures: n images of a deployment at one strategy, scored against real ones."""

    deployment: Path
    n: int = 1000
    strategy: str | None = None  # None: the deployment's default (strategy_choice.eval_strategy)
    steps: int = 50
    guidance: float | None = None  # None: the deployment's
    seed: int = 0
    classifier: Path | None = None  # None: <deployment folder>/classifier
    real_split: str = "test[8000:]"
    device: str | None = None
    data_dir: str | None = None


def evaluate(req: EvalRequest) -> tuple[np.ndarray, np.ndarray, dict]:
    """Generate and score: (x f32 [n,1,32,32], labels [n], metrics as metrics.json records them)."""
    from ddm.ops.data.dataset import load_dataset
    from ddm.ops.eval.strategy_choice import eval_strategy

    deployment = Deployment.load(req.deployment)
    guidance = deployment.guidance if req.guidance is None else req.guidance
    strategy, _ = eval_strategy(deployment, req.strategy)
    # What the scores need is loaded BEFORE sampling (minutes): a missing classifier or data folder
    # fails in a second instead of after the work. The real images are of the dataset the classifier
    # was trained on.
    classifier = Path(req.classifier or deployment.path.parent / "classifier")
    model, meta = load_classifier(classifier)
    real = load_dataset(meta["dataset"], req.real_split, req.data_dir)
    x, labels, cost = generate(req.deployment, req.n, strategy, req.steps, guidance, req.seed, req.device)
    metrics = {
        "deployment": display_path(deployment.path),
        "strategy": strategy,
        "steps": req.steps,
        "guidance": guidance,
        "n": req.n,
        "seed": req.seed,
        "real_split": real.split,
        # FDs compare only under one classifier's features: name it and its weights
        "classifier": display_path(classifier),
        "classifier_sha256": file_sha256(classifier / CLASSIFIER_WEIGHTS)[:16],
        **score(x, labels, model, meta, real.as_model_input()),
        **cost,
    }
    return x, labels, metrics


def display_path(path: Path) -> str:
    """The deployment as the user would type it here: relative to the working folder where possible."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


class CountingExpert:
    """Wraps Expert.velocity and counts UNet forward passes (one per row, two for a guided row)."""

    def __init__(self, expert):
        self.expert = expert
        self.forwards = 0
        self.seconds = 0.0

    def __call__(self, x, t, y, g):
        t0 = time.perf_counter()
        v = self.expert.velocity(x, t, y, g)
        self.seconds += time.perf_counter() - t0
        self.forwards += len(x) + int(np.count_nonzero(np.asarray(g) != 1.0))
        return v


def generate(
    deployment_path: Path, n: int, strategy: str, steps: int, guidance: float, seed: int, device=None
):
    """Sample n images, labels cycling 0..9. Returns (x f32 [n,1,32,32], labels, cost dict)."""
    deployment = Deployment.load(deployment_path)
    policy = load_policy(deployment)
    policy.check_strategy(Strategy.parse(strategy))  # before loading experts: fail fast
    experts = {k: CountingExpert(e) for k, e in load_experts(deployment, device=device).items()}
    labels = np.arange(n) % 10
    chunks = []
    t0 = time.perf_counter()
    for c, start in enumerate(tqdm(range(0, n, MAX_SAMPLES), desc=f"eval {strategy}")):
        part = labels[start : start + MAX_SAMPLES].tolist()
        spec = JobSpec.new(part, steps=steps, strategy=strategy, guidance=guidance, seed=seed + c)
        chunks.append(sample_local(experts, policy, ResolvedJob.of(spec)))
    wall = time.perf_counter() - t0
    cost = {
        "seconds_per_image": wall / n,
        "forward_passes_per_image": sum(e.forwards for e in experts.values()) / n,
        "expert_share": {
            str(k): e.forwards / max(1, sum(x.forwards for x in experts.values())) for k, e in experts.items()
        },
        "wall_s": wall,
    }
    return np.concatenate(chunks), labels, cost


def score(x: np.ndarray, labels: np.ndarray, model, meta: dict, real: np.ndarray) -> dict:
    """Accuracy and FD of generated x [n,1,32,32] against real held-out images [m,1,32,32], by the
    classifier `model` (load_classifier) whose meta is `meta`."""
    pred = predict(model, x).argmax(1)
    per_class = [float((pred[labels == c] == c).mean()) if np.any(labels == c) else None for c in range(10)]
    gen_f, real_f = features(model, x), features(model, real)
    half = min(len(x), len(real) // 2)  # the floor compares two real sets of the generated set's size
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(real))
    return {
        "accuracy": float((pred == labels).mean()),
        "per_class_accuracy": per_class,
        "fd": frechet_distance(gen_f, real_f),
        **frechet_bootstrap(gen_f, real_f),
        "fd_real_vs_real": frechet_distance(real_f[perm[:half]], real_f[perm[half : 2 * half]]),
        "fd_real_vs_real_n": half,
        "classifier_test_accuracy": meta.get("test_accuracy"),
    }


def write_report(out_dir: Path, x: np.ndarray, labels: np.ndarray, metrics: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ddm.client.images import save_grid

    out_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out_dir / "metrics.json", metrics)
    rows = min(8, len(x) // 10)
    order = (
        np.concatenate([np.flatnonzero(labels == c)[:rows] for c in range(10)]).reshape(10, rows).T.ravel()
    )
    save_grid(x[order], out_dir / "samples.png", cols=10)
    fig, ax = plt.subplots(figsize=(5, 2.8), dpi=120)
    ax.bar(range(10), [a or 0 for a in metrics["per_class_accuracy"]], color="#4c78a8")
    ax.set_xticks(range(10))
    ax.set_ylim(0, 1.0)
    ax.set_xlabel("requested label")
    ax.set_ylabel("classifier agrees")
    ax.set_title(
        f"{metrics['strategy']}: accuracy {metrics['accuracy']:.3f}, FD {metrics['fd']:.2f}", fontsize=9
    )
    fig.tight_layout()
    fig.savefig(out_dir / "per_class_accuracy.png")
    plt.close(fig)
