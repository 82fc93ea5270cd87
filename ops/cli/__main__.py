"""`python -m ddm.ops.cli ...` runs the `ddm` command (the tests start workers this way)."""

from ddm.ops.cli import main

raise SystemExit(main())
