"""`ddm import paris DIR --out OUT` and `ddm import dit DIR... --vae VAE --out OUT`: a deployment that
serves other people's checkpoints in place (ops/importers/: one file per format; docs/IMPORT.md)."""

from __future__ import annotations

import argparse


def _ids(text: str) -> frozenset[int]:
    try:
        return frozenset(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected expert ids like 1,3, got {text!r}") from None


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="format", metavar="FORMAT", required=True)
    paris = sub.add_parser(
        "paris",
        help="Bagel's Paris: 8 DiT experts, a DiT router, CLIP text, SD-VAE latents",
        description="Check a Paris folder from its safetensors headers (nothing loaded; a mismatch is "
        "refused with the missing, unexpected and wrongly shaped tensors) and write a deployment that "
        "serves it in place: its experts (PyTorch, or Flax with --jax), its router, CLIP as the text-encoder "
        "stage and its VAE as the decoder stage, with Paris's own sampling as the defaults (guidance 7.5 "
        "against the empty prompt, top-2, diffusers' flow-matching timesteps).",
    )
    paris.add_argument(
        "dir", help="the Paris folder (config.json, expert_<i>/, router/, vae/, text_encoder/, ...)"
    )
    paris.add_argument("--out", required=True, help="folder for deployment.toml and the stages' meta.json")
    paris.add_argument(
        "--jax",
        type=_ids,
        default=frozenset(),
        metavar="IDS",
        help="experts served by Flax, e.g. 1,3 (default: none)",
    )
    dit = sub.add_parser(
        "dit",
        help="diffusers DiTTransformer2DModel folders (e.g. facebook/DiT-XL-2-256) and an AutoencoderKL",
        description="Check each diffusers DiT folder (or DiTPipeline root) from its safetensors header and "
        "write a deployment that serves them in place, one expert each, with the AutoencoderKL as the "
        "decoder stage: DDPM epsilon with learned sigma, converted at the expert to this system's velocity.",
    )
    dit.add_argument(
        "dirs", nargs="+", help="DiTTransformer2DModel folders or DiTPipeline roots: one expert each"
    )
    dit.add_argument(
        "--vae", default=None, help="an AutoencoderKL folder (default: the first pipeline root's vae/)"
    )
    dit.add_argument("--out", required=True, help="folder for deployment.toml and the stages' meta.json")
    dit.add_argument(
        "--guidance", type=float, default=None, help="default guidance (default: DiTPipeline's 4.0)"
    )
    dit.add_argument("--device", default="auto", help="every expert's and the decoder's device")


def main(args: argparse.Namespace) -> int:
    if args.format == "paris":
        from ddm.ops.importers.paris import import_paris

        path = import_paris(args.dir, args.out, args.jax)
    else:
        from ddm.ops.importers.diffusers_dit import GUIDANCE, import_dit

        guidance = GUIDANCE if args.guidance is None else args.guidance
        path = import_dit(args.dirs, args.vae, args.out, guidance=guidance, device=args.device)
    print(f"wrote {path}\nserve it: ddm up --deployment {path}")
    return 0
