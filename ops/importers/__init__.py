"""Other people's checkpoints, one file per format: each reads a folder's names and shapes from its
safetensors headers (nothing loaded), and writes a deployment that serves the folder in place (meta.json
and cards beside nothing copied). paris.py: Bagel's Paris; diffusers_dit.py: diffusers DiT folders."""
