"""`ddm submit --notify URL` (issue 40 item 8): the URL travels in the job's spec, for the router to
POST once the job ends (tests/router/test_notify.py)."""

from __future__ import annotations

import json

from ddm.ops.cli import main


def test_submit_takes_notify(env, capsys):
    url = "http://127.0.0.1:9/hook"
    assert main(["submit", "--no-check", "--notify", url, "--label", "3", "--json"]) == 0
    job = json.loads(capsys.readouterr().out)
    assert job["spec"]["notify"] == url
    assert main(["submit", "--no-check", "--notify", "ftp://x/y", "--label", "3"]) == 2
    assert "notify" in capsys.readouterr().err
