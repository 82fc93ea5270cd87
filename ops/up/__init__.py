"""Bringing a deployment up on one machine: the supervisor, `ddm up`'s plan and loop, the web UI child."""
