"""Benchmarks: `ddm bench` (the pipeline against the in-process limit and the HTTP-per-step baseline),
the transport floor, forward-pass costs by batch, and A/B runs against another git revision."""
