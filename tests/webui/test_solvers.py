"""Solvers and time grids in the web UI (issue 26), on the real Redis and RabbitMQ: the form offers the
serving deployment's solvers and grids with its defaults preselected, a submit carries the one picked
(or none: the deployment's default), one the deployment does not serve is refused naming those it does,
a descriptor from before solvers (no "sampling") serves Euler on the uniform grid only, and the job
view shows the solver, grid and evaluations (NFE) the router resolved."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from ddm.schema.messages import JobSpec
from ddm.schema.solver import SamplingOffer
from tests.support.browser import chromium_page, open_connected
from tests.support.fakes import descriptor_of

OFFER = SamplingOffer(
    solvers=("euler", "heun", "ab3"), grids=("uniform", "edm"), default_solver="heun", default_grid="edm"
)


def offered(html: str, menu: str) -> list[tuple[str, bool, str]]:
    """(value, selected, text) of each option of the page's <select id=menu>."""
    start = html.index(f'<select id="{menu}">')
    select = html[start : html.index("</select>", start)]
    found = re.findall(r'<option value="([^"]*)"( selected)?>([^<]*)</option>', select)
    return [(value, bool(selected), text) for value, selected, text in found]


def test_the_form_offers_the_deployments_solvers_and_grids_and_submits_what_was_picked(
    make_app, fake, fake_deployment
):
    fake.all_workers()
    app = make_app()
    fake.publish(fake_deployment, sampling=OFFER)
    http = app.test_client()
    html = http.get("/").get_data(as_text=True)
    assert offered(html, "solver") == [
        ("euler", False, "euler"),
        ("heun", True, "heun (default)"),
        ("ab3", False, "ab3"),
    ]
    assert offered(html, "grid") == [("uniform", False, "uniform"), ("edm", True, "edm (default)")]
    dep = http.get("/api/config").get_json()["deployment"]
    assert dep["sampling"] == OFFER.to_dict()
    assert dep["solver_stages"] == {"euler": 1, "heun": 2, "ab3": 1}
    assert dep["solver_hints"]["ab3"].startswith("1 per step, reuses the last 2 steps")

    picked = http.post("/api/jobs", json={"labels": [2], "steps": 8, "solver": "ab3", "grid": "uniform"})
    assert picked.status_code == 201, picked.get_json()
    job = http.get(f"/api/jobs/{picked.get_json()['job_id']}").get_json()
    assert (job["solver"], job["grid"], job["nfe"]) == ("ab3", "uniform", 8)  # asked for, not resolved yet
    unset = http.post("/api/jobs", json={"labels": [2], "steps": 8, "solver": None, "grid": None})
    assert unset.status_code == 201, unset.get_json()
    job = http.get(f"/api/jobs/{unset.get_json()['job_id']}").get_json()
    assert (job["solver"], job["grid"], job["nfe"]) == (None, None, None)  # the router resolves them

    for form, words in (
        ({"solver": "midpoint"}, "expected solver one of euler, heun, ab3, got 'midpoint'"),
        ({"grid": "shift:3"}, "expected grid one of uniform, edm, got 'shift:3'"),
        ({"solver": "rk4"}, "solver one of euler, heun, midpoint, ab2, ab3, got 'rk4'"),
    ):
        refused = http.post("/api/jobs", json={"labels": [2], "steps": 8, **form})
        assert refused.status_code == 400 and refused.get_json()["kind"] == "bad_input"
        assert words in refused.get_json()["error"], refused.get_json()


def test_a_descriptor_from_before_solvers_serves_euler_on_the_uniform_grid_only(
    make_app, fake, fake_deployment
):
    fake.all_workers()
    app = make_app()
    wire = descriptor_of(fake_deployment).to_dict()
    del wire["sampling"]  # what a router from before solvers publishes
    fake.r.set(fake.names.deployment, json.dumps(wire), ex=60)
    http = app.test_client()
    html = http.get("/").get_data(as_text=True)
    assert offered(html, "solver") == [("euler", True, "euler (default)")]
    assert offered(html, "grid") == [("uniform", True, "uniform (default)")]
    dep = http.get("/api/config").get_json()["deployment"]
    assert dep["sampling"]["solvers"] == ["euler"] and dep["sampling"]["grids"] == ["uniform"]
    assert http.post("/api/jobs", json={"labels": [2], "steps": 4}).status_code == 201
    refused = http.post("/api/jobs", json={"labels": [2], "steps": 4, "solver": "heun"})
    assert refused.status_code == 400 and "solver one of euler, got 'heun'" in refused.get_json()["error"]


def test_no_router_serving_leaves_the_menus_to_the_deployment(make_app, fake):
    html = make_app(deployment=None).test_client().get("/").get_data(as_text=True)
    assert offered(html, "solver") == [("", True, "the serving deployment's default")]
    assert offered(html, "grid") == [("", True, "the serving deployment's default")]


def test_the_job_shows_the_solver_grid_and_evaluations_the_router_resolved(make_app, fake, fake_deployment):
    app = make_app()
    descriptor = fake.publish(fake_deployment, sampling=OFFER)
    http = app.test_client()
    spec = JobSpec.new([3], steps=8, strategy="oracle", guidance=1.0)  # solver and grid left unset
    fake.store.start(spec.job_id, "w-router", 0, descriptor.resolve(spec), spec)
    job = http.get(f"/api/jobs/{spec.job_id}").get_json()
    assert (job["solver"], job["grid"], job["nfe"]) == ("heun", "edm", 16)  # the deployment's defaults

    # a job a router from before solvers ran: it recorded none, and it ran Euler on the uniform grid
    old = dataclasses.replace(spec, job_id=JobSpec.new([3]).job_id)
    fake.store.start(old.job_id, "w-router", 0, descriptor.resolve(old), old)
    fake.r.hdel(fake.names.job(old.job_id), "solver", "grid", "nfe")
    job = http.get(f"/api/jobs/{old.job_id}").get_json()
    assert (job["solver"], job["grid"], job["nfe"]) == ("euler", "uniform", 8)


@pytest.mark.browser
def test_pick_heun_see_the_evaluations_in_the_summary_and_the_job(ui_server, fake, fake_deployment):
    """In Chromium: the menus show the defaults, the hint says what a step costs, the summary counts the
    evaluations, the submit carries the solver picked (and no grid: the default), and the job view shows
    what the router resolved."""
    descriptor = fake.publish(fake_deployment)  # the default offer: every solver, Euler on uniform
    fake.all_workers()
    url = ui_server()
    with chromium_page() as page:
        open_connected(page, url)
        page.wait_for_selector("#solver option[value='heun']", state="attached", timeout=10_000)
        assert page.input_value("#solver") == "euler" and page.input_value("#grid") == "uniform"
        assert page.locator("#solver option:checked").text_content() == "euler (default)"
        page.fill("#steps", "8")
        assert "8 steps · 8 evaluations" in page.text_content("#form-summary")
        page.select_option("#solver", "ab3")
        assert page.text_content("#solver-hint").startswith("1 per step, reuses the last 2 steps")
        page.select_option("#solver", "heun")
        assert page.text_content("#solver-hint").startswith("2 evaluations per step")
        assert "8 steps × 2 = 16 evaluations" in page.text_content("#form-summary")
        page.click("#submit")
        page.wait_for_selector("#stage[data-job-id]", state="attached", timeout=15_000)
        assert page.locator("#form-error").is_hidden(), page.text_content("#form-error")
        job_id = page.get_attribute("#stage", "data-job-id")
        spec = JobSpec.from_json(fake.r.hget(fake.names.job(job_id), "spec").decode())
        assert (spec.solver, spec.grid, spec.steps) == ("heun", None, 8)  # the grid left to the deployment

        queued = page.locator("#job-sub", has_text="heun on the default grid · 8 steps × 2 = 16 evaluations")
        queued.wait_for(timeout=15_000)  # before a router starts it: what the job asked for
        fake.store.start(job_id, "w-router", 0, descriptor.resolve(spec))  # as the router starts it
        page.wait_for_selector("#job-status:text('running')", timeout=15_000)
        sub = page.text_content("#job-sub")
        assert "heun on the uniform grid" in sub and "8 steps × 2 = 16 evaluations" in sub, sub
        assert page.get_attribute("#stage", "data-nfe") == "16"
