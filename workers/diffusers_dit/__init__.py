"""A diffusers DiTTransformer2DModel (class-conditional, DDPM eps, learned sigma: facebook/DiT-XL-2-256's
kind) served as an expert in place: its record (architecture.py), config (config.py) and the torch model
(torch_model.py, which imports diffusers on first use). Its experts come in through
ops/importers/diffusers_dit.py."""
