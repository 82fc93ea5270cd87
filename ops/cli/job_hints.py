"""What `ddm submit --wait` says when it stops waiting for a job that goes on (its --timeout, a
Ctrl-C): where the job stands and the commands that follow it, fetch it or stop it. Waiting is the
client's business; the job belongs to the router and runs on."""

from __future__ import annotations


def still_going(job_id: str, st) -> str:
    """`st`: the job's JobHash now. One line: where it stands, and the commands for what comes next."""
    if st.status.value == "queued":
        where = "is still queued: no router has taken it (is a router worker running? `ddm up`)"
    else:
        where = f"is still {st.status.value} at step {st.step}/{st.steps}"
    return (
        f"job {job_id} {where}; it goes on. Follow it: `ddm status {job_id}`; its images when done: "
        f"`ddm result {job_id} --timeout 600 --out grid.png`; stop it: `ddm cancel {job_id}`"
    )
