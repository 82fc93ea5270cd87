"""`ddm ui` (Werkzeug, what `ddm up` runs) says once, in its own words, that it serves one machine and
what to run for a shared server; Werkzeug's "do not use it in a production deployment" banner, printed
on every `ddm up`, is gone (issue 40 part 7)."""

from __future__ import annotations

import urllib.request


def test_ddm_ui_names_the_production_command_without_werkzeugs_banner(ui_server, tmp_path):
    url = ui_server()
    with urllib.request.urlopen(url + "/healthz", timeout=5) as resp:
        assert resp.status == 200
    port = url.rsplit(":", 1)[1]
    output = (tmp_path / f"ui-{port}.log").read_text()
    assert "for a shared server run gunicorn -c python:ddm.webui.gunicorn_conf" in output, output
    assert "production deployment" not in output and "development server" not in output, output
