"""Bagel's Paris (arXiv 2510.03434, MIT), the one open-weight DDM, in this system's own code (issue 38):
its expert (a PixArt-style DiT-XL/2 with cross-attention on CLIP's 77 tokens) in PyTorch and Flax, its
router (a DiT-B with a CLS token) in PyTorch, and the checks of a checkpoint folder in its layout.

    config.py        the two configs, every tensor's name and shape from them, and the configs read back
                     from a checkpoint's tensor shapes (depth and widths come from the weights)
    torch_model.py   ParisExpert and ParisRouter: state_dict names are Paris's own
    flax_model.py    ParisExpert in Flax, and Paris's state dict converted into its parameters
    weights.py       a safetensors file's names and shapes from its header alone (nothing loaded),
                     checked against the config's, and its tensors as numpy arrays

Facts come from the public re-implementation that loads the real checkpoint (the AWS Neuron port in
jimburtoft/neuronx-distributed-inference, contrib/models/paris-diffusion); none of its code is here.
The real weights are gated and were never loaded here: everything is proven on fixtures built in the
same layout (tests/support/paris_fixture.py). Serving them (the importer, the tokens form of the text
encoder stage, the router worker running a PyTorch router) is not built yet.
"""
