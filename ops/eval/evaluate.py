"""`ddm eval`: sample n images across labels from a deployment and score them honestly.

- class accuracy: the requested label vs what the evaluation classifier sees (per class and overall,
  with a 95% percentile bootstrap interval over images);
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
from ddm.ops.eval.classifier import eval_classifier, fd_warning, features, held_out_split, predict
from ddm.ops.eval.frechet import FrechetBootstrap, frechet_bootstrap, frechet_distance
from ddm.router.deployment_loader import load_decoder, load_experts, load_policy
from ddm.router.sampler import sample_local
from ddm.schema.atomic import write_json_atomic
from ddm.schema.checkpoint_meta import file_sha256
from ddm.schema.deployment import Deployment
from ddm.schema.messages import MAX_SAMPLES, JobSpec
from ddm.schema.resolved import ResolvedJob
from ddm.schema.sample_space import LEGACY, SampleSpace
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
    real_split: str | None = None  # None: the split the classifier was measured on (held_out_split)
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
    classifier, model, meta = eval_classifier(deployment.path, req.classifier)
    real = load_dataset(meta["dataset"], held_out_split(meta, req.real_split), req.data_dir)
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
    if warning := fd_warning(metrics):
        metrics["warning"] = warning
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

    def __call__(self, x, t, y, g, **text):
        t0 = time.perf_counter()
        v = self.expert.velocity(x, t, y, g, **text)  # a text expert's cond and uncond embeddings
        self.seconds += time.perf_counter() - t0
        self.forwards += len(x) + int(np.count_nonzero(np.asarray(g) != 1.0))
        return v


def generate(
    deployment_path: Path, n: int, strategy: str, steps: int, guidance: float, seed: int, device=None
):
    """Sample n images, labels cycling over the deployment's classes. Returns (x f32 [n,C,H,W], labels,
    cost dict)."""
    deployment = Deployment.load(deployment_path)
    policy = load_policy(deployment)
    policy.check_strategy(Strategy.parse(strategy))  # before loading experts: fail fast
    experts = {k: CountingExpert(e) for k, e in load_experts(deployment, device=device).items()}
    x, labels, cost = sample_counted(
        experts, policy, n, strategy, steps, guidance, seed, space=deployment.sample_space
    )
    return to_pictures(load_decoder(deployment, device=device), x, cost), labels, cost


def to_pictures(decoder, x: np.ndarray, cost: dict) -> np.ndarray:
    """A latent deployment's samples decoded (its decoder; None: a pixel deployment, x as it is): it is
    scored on its pictures, as the pipeline returns them. The decoding time goes in cost["decode_s"]."""
    if decoder is None:
        return x
    t0 = time.perf_counter()
    x = decoder.decode(x)
    cost["decode_s"] = time.perf_counter() - t0
    return x


def sample_counted(
    experts: dict[int, CountingExpert],
    policy,
    n: int,
    strategy: str,
    steps: int,
    guidance: float,
    seed: int,
    solver: str | None = None,
    grid: str | None = None,
    progress: bool = True,
    space: SampleSpace = LEGACY,
):
    """Sample n images (labels cycling over the classes of `space`, 0..9 for MNIST; the null label in an
    unconditional space) with loaded, counted experts: chunk c of MAX_SAMPLES has seed seed + c, so two
    calls with one seed and n start from the same noise (paired images).
    Returns (x f32 [n,C,H,W], labels, cost dict: this call's forward passes and seconds)."""
    labels = np.arange(n) % space.num_classes if space.conditional else np.full(n, space.null_class)
    forwards0 = {k: e.forwards for k, e in experts.items()}
    chunks = []
    t0 = time.perf_counter()
    for c, start in enumerate(tqdm(range(0, n, MAX_SAMPLES), desc=f"eval {strategy}", disable=not progress)):
        part = labels[start : start + MAX_SAMPLES].tolist()
        spec = JobSpec.new(
            part, steps=steps, strategy=strategy, guidance=guidance, seed=seed + c, solver=solver, grid=grid
        )
        chunks.append(sample_local(experts, policy, ResolvedJob.of(spec, space)))
    wall = time.perf_counter() - t0
    forwards = {k: e.forwards - forwards0[k] for k, e in experts.items()}
    cost = {
        "seconds_per_image": wall / n,
        "forward_passes_per_image": sum(forwards.values()) / n,
        "expert_share": {str(k): f / max(1, sum(forwards.values())) for k, f in forwards.items()},
        "wall_s": wall,
    }
    return np.concatenate(chunks), labels, cost


def score(x: np.ndarray, labels: np.ndarray, model, meta: dict, real: np.ndarray) -> dict:
    """Accuracy and FD of generated x [n,1,32,32] against real held-out images [m,1,32,32], by the
    classifier `model` (load_classifier) whose meta is `meta`."""
    real_f = features(model, real)
    return {
        **score_features(predict(model, x).argmax(1), labels, features(model, x), real_f),
        **real_floor(real_f, len(x)),
        "classifier_test_accuracy": meta.get("test_accuracy"),
    }


def score_features(
    pred: np.ndarray,
    labels: np.ndarray,
    gen_f: np.ndarray,
    real_f: np.ndarray,
    keep_draws: bool = False,
    bootstrap: FrechetBootstrap | None = None,
) -> dict:
    """Accuracy (with a bootstrap interval over images) and FD (with frechet_bootstrap's) of generated
    images whose predicted classes are pred [n] and whose features are gen_f [n, D], against real
    features real_f [m, D]. keep_draws: the bootstrap draws too ("correct", "fd_draws"), for paired
    comparisons of images from the same noise (ddm.ops.eval.sweep). bootstrap: a FrechetBootstrap of
    real_f made once for many generated sets (frechet_bootstrap's 200 redraws otherwise)."""
    correct = pred == labels
    classes = int(labels.max()) + 1 if len(labels) else 0  # labels cycle over the classes: 10 for MNIST
    per_class = [
        float((pred[labels == c] == c).mean()) if np.any(labels == c) else None for c in range(classes)
    ]
    out = {
        "accuracy": float(correct.mean()),
        "accuracy_ci95": accuracy_interval(correct),
        "per_class_accuracy": per_class,
        "fd": frechet_distance(gen_f, real_f),
        **(
            bootstrap.score(gen_f, keep_draws)
            if bootstrap is not None
            else frechet_bootstrap(gen_f, real_f, keep_draws=keep_draws)
        ),
    }
    if keep_draws:
        out["correct"] = "".join("1" if c else "0" for c in correct)
    return out


def accuracy_draws(correct: np.ndarray, resamples: int = 1000, seed: int = 0) -> np.ndarray:
    """Class accuracy of `resamples` bootstrap redraws of the images (rows of correct [n] bool). For one
    seed and n the rows drawn are the same, so two sets of paired images give paired draws."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(correct), (resamples, len(correct)))
    return np.asarray(correct, np.float64)[idx].mean(1)


def accuracy_interval(correct: np.ndarray) -> list[float]:
    """The 95% percentile bootstrap interval of class accuracy over images."""
    lo, hi = np.percentile(accuracy_draws(correct), [2.5, 97.5])
    return [float(lo), float(hi)]


def real_floor(real_f: np.ndarray, n: int) -> dict:
    """FD between two disjoint halves of the real images, each of the generated set's size n (at most half
    the real set): the FD a perfect generator would score at this n."""
    half = min(n, len(real_f) // 2)
    perm = np.random.default_rng(0).permutation(len(real_f))
    return {
        "fd_real_vs_real": frechet_distance(real_f[perm[:half]], real_f[perm[half : 2 * half]]),
        "fd_real_vs_real_n": half,
    }


def write_report(out_dir: Path, x: np.ndarray, labels: np.ndarray, metrics: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ddm.client.images import save_grid

    out_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out_dir / "metrics.json", metrics)
    k = len(metrics["per_class_accuracy"])  # the classes the labels cycled over (10 for MNIST)
    rows = min(8, len(x) // k)
    order = np.concatenate([np.flatnonzero(labels == c)[:rows] for c in range(k)]).reshape(k, rows).T.ravel()
    save_grid(x[order], out_dir / "samples.png", cols=k)
    fig, ax = plt.subplots(figsize=(5, 2.8), dpi=120)
    ax.bar(range(k), [a or 0 for a in metrics["per_class_accuracy"]], color="#4c78a8")
    ax.set_xticks(range(k))
    ax.set_ylim(0, 1.0)
    ax.set_xlabel("requested label")
    ax.set_ylabel("classifier agrees")
    ax.set_title(
        f"{metrics['strategy']}: accuracy {metrics['accuracy']:.3f}, FD {metrics['fd']:.2f}", fontsize=9
    )
    fig.tight_layout()
    fig.savefig(out_dir / "per_class_accuracy.png")
    plt.close(fig)
