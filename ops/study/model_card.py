"""Write MODEL_CARD.md for a checkpoint folder from its meta.json (and eval metrics, if given).

    python -m ddm.ops.study.model_card checkpoints/mnist/expert0_torch [--metrics DIR/metrics.json ...]

Every number on a card is read from files a command wrote; nothing is typed by hand.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ddm.ops.distill import student_summary
from ddm.schema.autoencoder_card import AutoencoderCard, split_latent_name
from ddm.schema.checkpoint_meta import kind_of, read_meta
from ddm.schema.expert_card import card_of
from ddm.workers.architectures import model_title

# What each dataset's checkpoints were trained and scored on, offline
MNIST_NOTE = (
    "Offline, only the MNIST **test** split exists on the machines this was trained on: training used its "
    "first 8,000 images (`test[:8000]`) and every held-out figure uses the other 2,000 (`test[8000:]`). "
    "It is not comparable with models trained on the 60,000-image train split."
)
FASHION_NOTE = (
    "Fashion-MNIST (Zalando Research, MIT licence) from the Debian package dataset-fashion-mnist: trained "
    "on `{split}` (of the 60,000-image train split); every held-out figure uses the 10,000-image `test` "
    "split, which it never saw."
)


EMOJI_NOTE = (
    "Colour emoji (Google's Noto Color Emoji, SIL OFL 1.1; groups from Unicode's emoji-test.txt) rendered "
    "here from the Debian packages fonts-noto-color-emoji and unicode-data (docs/DATA.md): trained on "
    "`{split}` (1,580 base emoji, skin tones folded in); every held-out figure uses the 290-emoji `test` "
    "split, held out by a hash of each emoji, which it never saw."
)


def data_note(meta: dict) -> str:
    part = meta.get("partition", {})
    dataset, split = meta.get("dataset") or part.get("dataset"), meta.get("split") or part.get("split")
    if "card" in meta and kind_of(meta) == "autoencoder":
        dataset, split = meta["card"]["trained_on"]["dataset"], meta["card"]["trained_on"]["split"]
    latent = split_latent_name(str(dataset))
    if latent is not None:  # latents of `ddm data encode`: the data note of the images they encode
        return f"latents of {latent[1]} (`ddm data encode`) of: " + data_note(
            {"dataset": latent[0], "split": split}
        )
    if dataset == "mnist":
        return MNIST_NOTE
    if dataset == "fashion-mnist":
        return FASHION_NOTE.format(split=split)
    if dataset in ("emoji", "emoji-64"):
        return EMOJI_NOTE.format(split=split)
    return f"{dataset} `{split}` (meta.json has the details)."


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def card(folder: Path, metrics: list[dict]) -> str:
    meta = read_meta(folder)
    kind = kind_of(meta)
    part = meta.get("partition", {})
    lines = [f"# {folder.name}: {kind} ({meta.get('framework', '?')})", ""]
    if "distilled_from" in meta:  # a student of `ddm distill`: not trained on one cluster
        lines += [student_summary(meta), ""]
    elif kind == "autoencoder":
        ae = AutoencoderCard.from_dict(meta["card"])
        rec = ae.reconstruction
        fd = (
            f", FD {rec['fd']:.1f} of the reconstructions of one half against the other half, where two real "
            f"halves score {rec['fd_floor']:.1f} ({rec.get('fd_n')} images a side)"
            if "fd" in rec
            else ""
        )
        lines += [
            "A KL-regularised convolutional autoencoder (workers/autoencoder; KL weight "
            f"{meta.get('kl_weight')}): {ae.pixel_space.describe()} -> latents "
            f"{'x'.join(map(str, ae.latent_shape))}, normalised to unit variance (scale {ae.scale:.4g}) in "
            f"{list(ae.value_range)}. Its latent space is `{ae.encoder_id}` "
            "(the first 12 hex digits of the weights' sha256): the name of every latent dataset it encodes "
            "and what a latent deployment's experts must have been trained on.",
            "",
            f"Reconstruction of {rec.get('n')} held-out images: PSNR {rec.get('psnr_db')} dB{fd}; the linear "
            f"latent -> RGB preview (fitted by least squares, published in the descriptor for the web UI) "
            f"{rec.get('preview_psnr_db')} dB.",
            "",
        ]
    elif kind == "expert":
        expert_card = card_of(meta)
        lines += [
            f"A {meta['preset']} {model_title(meta)} expert (PyTorch and Flax twins share one parameter "
            f"layout; `ddm convert` moves it across), trained alone on cluster {meta['expert']} of partition "
            f"`{part.get('id')}` ({part.get('method')}, {part.get('num_clusters')} clusters) of "
            f"{part.get('dataset')} `{part.get('split')}`: classes {meta.get('classes')}.",
            "",
            f"Objective: {expert_card.objective.describe()} (served as the deployment's one velocity: "
            f"docs/PROTOCOL.md, expert cards). Sample space: {expert_card.sample_space.describe()}.",
            "",
        ]
        lines += _prompt_lines(expert_card, meta)
    rows = {
        "training samples": meta.get("num_train_samples"),
        "steps": meta.get("steps"),
        "batch": meta.get("batch"),
        "wall time (s, 2 CPU cores shared with other work)": meta.get("wall_time_s"),
        # an autoencoder's is its reconstruction + KL objective, at the last step (the mean of the last 100
        # steps since num_params is in its meta)
        ("final loss" if kind == "autoencoder" else "final loss (mean of last 100 steps)"): meta.get(
            "final_loss"
        ),
        "parameters": meta.get("num_params"),
        "test accuracy": meta.get("test_accuracy"),
        "learning rate": meta.get("train", {}).get("lr", meta.get("lr")),
        "EMA decay": meta.get("train", {}).get("ema_decay"),
        "label dropout (guidance)": meta.get("train", {}).get("label_dropout", meta.get("label_dropout")),
        "seed": meta.get("train", {}).get("seed"),
    }
    lines += ["| | |", "|---|---|"] + [f"| {k} | {_fmt(v)} |" for k, v in rows.items() if v is not None]
    if "accuracy_by_t" in meta:
        lines += ["", "Accuracy by t (held-out data; `accuracy_by_t.png`):", ""]
        for name, c in meta["accuracy_by_t"].items():
            lines.append(
                f"- {name}: "
                + ", ".join(f"t~{m:.2f}: {a:.3f}" for m, a in zip(c["t_mid"], c["accuracy"], strict=True))
            )
    for m in metrics:
        lines += [
            "",
            f"Deployment evaluation, strategy `{m['strategy']}`, guidance {m.get('guidance', 1.0):g}, "
            f"{m['n']} images, {m['steps']} Euler steps "
            f"(`ddm eval`): class accuracy {m['accuracy']:.4f}, FD {m['fd']:.3f} "
            f"(real vs real {m['fd_real_vs_real']:.3f}), {m['forward_passes_per_image']:.1f} expert forward "
            f"passes and {m['seconds_per_image'] * 1000:.0f} ms per image.",
        ]
    lines += ["", f"Data: {data_note(meta)}", "", "Created: " + str(meta.get("created", "?")), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folder", type=Path)
    parser.add_argument("--metrics", type=Path, nargs="*", default=[])
    args = parser.parse_args(argv)
    text = card(args.folder, [json.loads(p.read_text()) for p in args.metrics])
    (args.folder / "MODEL_CARD.md").write_text(text)
    print(f"wrote {args.folder / 'MODEL_CARD.md'}")
    return 0


def _prompt_lines(expert_card, meta: dict) -> list[str]:
    """A text expert's captions, for its card ([] for any other expert)."""
    if expert_card.conditioning is None or "prompts" not in meta:
        return []
    p = meta["prompts"]
    return [
        f"Conditioned on {expert_card.conditioning.describe()}: {p.get('captions')}, "
        f"{p.get('distinct_prompts')} distinct prompts for its {p.get('images')} images "
        f"({p.get('uncaptioned')} without a caption train on the empty prompt).",
        "",
    ]


if __name__ == "__main__":
    raise SystemExit(main())


def write_model_card(folder: Path) -> None:
    """A checkpoint's MODEL_CARD.md with no study results (a distilled student's), beside its meta.json."""
    (Path(folder) / "MODEL_CARD.md").write_text(card(folder, []))
