"""Train one PyTorch expert: AdamW, EMA, flow-matching MSE. The loop is ddm.workers.training."""

from __future__ import annotations

import copy
from pathlib import Path

import torch
import torch.nn.functional as F

from ddm.workers.architectures import architecture_of_config
from ddm.workers.frameworks import TORCH
from ddm.workers.torch_expert.checkpoint import (
    load_train_state,
    save_train_state,
    save_weights,
    state_to_numpy,
)
from ddm.workers.training import TrainConfig, model_config


class TorchTrainer:
    def __init__(self, mcfg, tcfg: TrainConfig, device: str = "cpu"):
        """mcfg: a registered architecture's config (UNetConfig, ...): the model is that architecture's."""
        torch.manual_seed(tcfg.seed)
        self.device = torch.device(device)
        self.model = architecture_of_config(mcfg).build("torch", mcfg).to(self.device)
        self.ema = copy.deepcopy(self.model).eval().requires_grad_(False)
        self.tcfg = tcfg
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=tcfg.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=tcfg.weight_decay
        )

    def resume(self, out_dir: Path) -> tuple[int, float]:
        if not (out_dir / TORCH.train_state_file).is_file():
            return 0, 0.0
        return load_train_state(out_dir, self.model, self.ema, self.optimizer)

    def step(self, x_t, t, y, v, lr: float, ema: float) -> float:
        to = self.device
        x_t, t, y, v = (torch.from_numpy(a).to(to) for a in (x_t, t, y, v))
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        loss = F.mse_loss(self.model(x_t, t, y), v)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.tcfg.grad_clip)
        self.optimizer.step()
        with torch.no_grad():
            for p_ema, p in zip(self.ema.parameters(), self.model.parameters(), strict=True):
                p_ema.lerp_(p, 1.0 - ema)
        return float(loss.item())

    def save(self, out_dir: Path, step: int, wall_s: float) -> None:
        save_weights(out_dir, state_to_numpy(self.ema))
        save_train_state(out_dir, self.model, self.ema, self.optimizer, step, wall_s)


def make_trainer(
    tcfg: TrainConfig, device: str = "cpu", architecture: str = "unet", **sizing
) -> TorchTrainer:
    """The registry's trainer factory: `architecture` at preset tcfg.preset, sized by `sizing`
    (ddm.workers.training.model_config), on `device` (cpu or cuda)."""
    return TorchTrainer(model_config(tcfg, architecture, **sizing), tcfg, device=device)
