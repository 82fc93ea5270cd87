"""ddm-pipeline: Decentralized Diffusion Models served over a message queue.

The top-level folders schema/, workers/, router/, ops/ (and webui/) are installed as
ddm.schema, ddm.workers, ddm.router, ddm.ops.
"""

__version__ = "0.1.0"
