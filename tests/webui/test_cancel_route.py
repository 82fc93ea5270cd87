"""POST /api/jobs/<id>/cancel, the Cancel button's route: a running job gets the cancel request its
router honours at the next step; with DDM_UI_TOKEN set it needs the token a submit needs."""

from __future__ import annotations


def test_cancel_a_running_job(make_app, fake):
    http = make_app().test_client()
    spec = fake.start_job(steps=4)
    resp = http.post(f"/api/jobs/{spec.job_id}/cancel")
    assert resp.status_code == 200 and resp.get_json()["status"] == "running"  # until its next step
    assert fake.store.job(spec.job_id).cancel_requested_at is not None
    assert http.post("/api/jobs/nosuchjob/cancel").status_code == 404
    assert http.post("/api/jobs/bad%20id/cancel").status_code == 400


def test_cancel_needs_the_token_when_one_is_set(make_app, fake):
    http = make_app(token="s3cret-token").test_client()
    spec = fake.start_job(steps=4)
    refused = http.post(f"/api/jobs/{spec.job_id}/cancel")
    assert refused.status_code == 401 and refused.get_json()["kind"] == "unauthorized"
    assert fake.store.job(spec.job_id).cancel_requested_at is None
    headers = {"Authorization": "Bearer s3cret-token"}
    assert http.post(f"/api/jobs/{spec.job_id}/cancel", headers=headers).status_code == 200


def test_the_page_has_the_cancel_button(make_app):
    html = make_app().test_client().get("/").get_data(as_text=True)
    assert 'id="cancel-job"' in html
