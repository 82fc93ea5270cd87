"""Train one JAX/Flax expert: optax AdamW (same update as torch.optim.AdamW), EMA, flow-matching MSE.

The loop is ddm.workers.training, shared with the PyTorch trainer.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import optax

from ddm.workers.architectures import architecture_of_config
from ddm.workers.frameworks import JAX
from ddm.workers.jax_expert.checkpoint import load_train_state, save_train_state, save_weights
from ddm.workers.training import TrainConfig, model_config


class JaxTrainer:
    def __init__(self, mcfg, tcfg: TrainConfig):
        """mcfg: a registered architecture's config (UNetConfig, ...): the model is that architecture's."""
        self.architecture = architecture_of_config(mcfg)
        self.model = self.architecture.build("jax", mcfg)
        params = self.architecture.code("jax", "init_params")(self.model, tcfg.seed)
        # scale_by_adam + decayed weights, then p -= lr * update: exactly torch.optim.AdamW, with the
        # learning rate passed in each step so both frameworks share one schedule (training.py).
        self.tx = optax.chain(
            optax.clip_by_global_norm(tcfg.grad_clip),
            optax.scale_by_adam(b1=0.9, b2=0.999, eps=1e-8),
            optax.add_decayed_weights(tcfg.weight_decay),
        )
        ema = jax.tree_util.tree_map(jnp.copy, params)  # own buffers: the step donates both trees
        self.state = {"params": params, "ema": ema, "opt": self.tx.init(params), "step": 0, "wall_s": 0.0}
        self._train_step = jax.jit(partial(_train_step, self.model, self.tx), donate_argnums=(0,))

    def resume(self, out_dir: Path) -> tuple[int, float]:
        if not (out_dir / JAX.train_state_file).is_file():
            return 0, 0.0
        self.state = load_train_state(out_dir, self.state)
        return int(self.state["step"]), float(self.state["wall_s"])

    def step(self, x_t, t, y, v, lr: float, ema: float) -> float:
        nhwc = lambda a: jnp.asarray(a.transpose(0, 2, 3, 1))  # noqa: E731
        tree = {k: self.state[k] for k in ("params", "ema", "opt")}
        tree, loss = self._train_step(tree, nhwc(x_t), jnp.asarray(t), jnp.asarray(y), nhwc(v), lr, ema)
        self.state.update(tree)
        return float(loss)

    def save(self, out_dir: Path, step: int, wall_s: float) -> None:
        host = jax.device_get({k: self.state[k] for k in ("params", "ema", "opt")})
        canonical = self.architecture.from_flax(host["ema"])
        save_weights(out_dir, canonical, host["ema"], self.architecture)
        save_train_state(out_dir, {**host, "step": step, "wall_s": wall_s})


def make_trainer(tcfg: TrainConfig, device: str = "cpu", architecture: str = "unet", **sizing) -> JaxTrainer:
    """The registry's trainer factory: `architecture` at preset tcfg.preset, sized by `sizing`
    (ddm.workers.training.model_config). `device` is torch's: JAX trains where JAX runs (its default
    backend)."""
    return JaxTrainer(model_config(tcfg, architecture, **sizing), tcfg)


def _train_step(model, tx, tree, x_t, t, y, v, lr, ema):
    def loss_fn(params):
        pred = model.apply({"params": params}, x_t, t, y)  # [B, H, W, C]
        return jnp.mean((pred - v) ** 2)

    loss, grads = jax.value_and_grad(loss_fn)(tree["params"])
    updates, opt = tx.update(grads, tree["opt"], tree["params"])
    params = jax.tree_util.tree_map(lambda p, u: p - lr * u, tree["params"], updates)
    ema_params = jax.tree_util.tree_map(lambda e, p: ema * e + (1.0 - ema) * p, tree["ema"], params)
    return {"params": params, "ema": ema_params, "opt": opt}, loss


__all__ = ["JaxTrainer"]
