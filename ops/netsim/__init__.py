"""Links between "hosts" for tests and benchmarks: a userspace TCP proxy per link (delay, jitter,
blackhole, reset; this kernel has no netem), Linux network namespaces joined by veth pairs, and a
remote host for a worker built from both (ddm.ops.netsim.link.RemoteHost)."""
