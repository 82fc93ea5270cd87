"""Benchmarks: `ddm bench` (the pipeline against the in-process limit and the HTTP-per-step baseline),
the transport floor, forward-pass costs by batch, A/B runs against another git revision, and the WAN
run (`ddm bench --rtt-ms`: experts behind slow links, ddm.ops.bench.wan)."""
