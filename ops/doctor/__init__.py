"""`ddm doctor`: is this machine set up to use or serve a deployment? Each check says ok, FAIL (with how
to fix it) or skip (not needed for the role asked about): settings, RabbitMQ, Redis, their permissions,
the deployment file and its checkpoints, the installed packages, the data folder.

    from ddm.ops.doctor import DoctorOptions, run_doctor
    checks = run_doctor(DoctorOptions(role="client"))
"""

from ddm.ops.doctor.checks import Check, DoctorOptions
from ddm.ops.doctor.run import run_doctor

__all__ = ["Check", "DoctorOptions", "run_doctor"]
