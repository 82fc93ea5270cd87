// ddm web UI: the job on stage: what the page knows of it, watching it (again after a reconnect or a
// reload: the server replays its steps), its title, status, queue place and progress, and cancelling it.

import { $, announce, b64ToBytes, hideAlert, showAlert } from "./dom.js";
import { state } from "./state.js";
import { evaluationsText, labelsText, promptOf, promptText, sampleShape } from "./facts.js";
import { authHeaders, currentToken, tokenField } from "./auth.js";
import { socket } from "./connection.js";
import { buildTiles, drawFrame, relabelTiles } from "./tiles.js";
import { buildStrip } from "./strip.js";
import { stopPlaying } from "./playback.js";

export function newJob(id, spec) {
  const prompt = spec && spec.prompt !== undefined ? spec.prompt : null;
  return {
    id: id,
    steps: spec ? spec.steps : 0,
    // a text job's prompt (null: none); its images' labels are its null label, which names nothing here
    prompt: prompt,
    negativePrompt: spec && spec.negative_prompt !== undefined ? spec.negative_prompt : null,
    labels: spec && prompt === null ? spec.labels : [],
    labelNames: null, // the names of its labels as its own deployment named them (the job payload's)
    n: spec ? spec.labels.length : 0,
    cols: 1,
    status: "queued",
    lastStep: 0,
    framesSeen: 0,
    frames: [], // step -> {step, t, experts, weights, latency_ms, pixels|null}
    shown: 0, // step drawn on the tiles
    follow: true, // the tiles follow the newest step (false while the user scrubs)
    canvases: [],
    bars: [],
    layout: null, // {cols, scale} the tiles were built with (js/tiles.js)
    shape: sampleShape(), // [C, H, W] of one latent: the deployment's, then the frames'
  };
}

// A latent deployment's job is done: its decoded images replace the previews on the tiles (the last
// step shows them; scrubbing back shows each step's preview).
export function showDecoded(j) {
  fetch("/api/jobs/" + encodeURIComponent(j.id) + "/result.pixels", { headers: authHeaders() })
    .then((r) => (r.ok ? r.json() : null))
    .then((d) => {
      if (!d || state.job !== j || !j.lastStep) return;
      const last = j.frames[j.lastStep];
      j.decoded = { ...last, pixels: b64ToBytes(d.pixels), channels: d.channels, decoded: true };
      $("stage").dataset.decoded = "1";
      if (j.follow) drawFrame(j.lastStep);
      announce("ddm:decoded", { id: j.id });
    })
    .catch(() => {});
}

export function watch(jobId, spec) {
  stopPlaying();
  state.job = newJob(jobId, spec);
  announce("ddm:job", { id: jobId });
  history.replaceState(null, "", "#job=" + encodeURIComponent(jobId));
  hideAlert($("job-error"));
  $("stage").dataset.jobId = jobId;
  delete $("stage").dataset.nfe;
  delete $("stage").dataset.decoded;
  $("tiles").replaceChildren();
  $("download").hidden = true;
  $("scrub-row").hidden = true;
  $("job-prompt").hidden = true; // the last job's, until this one's status says
  setStatus("queued");
  showQueue(null);
  if (spec) {
    const prompts = { prompt: spec.prompt ?? null, negative_prompt: spec.negative_prompt ?? null };
    setupJob({ job_id: jobId, steps: spec.steps, labels: spec.labels, n: spec.labels.length, ...prompts });
  }
  sendWatch();
}

export function sendWatch() {
  // (again after a reconnect or a reload: the server replays the steps; those already here are skipped)
  const id = state.job.id;
  const request = { job_id: id };
  if (tokenField) request.token = currentToken(); // DDM_UI_TOKEN: watching needs it too
  socket.timeout(20000).emit("watch", request, (err, res) => {
    if (!state.job || state.job.id !== id) return;
    if (err) return showAlert($("job-error"), "unavailable", "the server did not answer within 20 s");
    if (!res.ok) {
      // refused before anything was sent (token, limits): the job itself is fine
      if (res.kind === "not_found") setStatus("expired");
      else if (res.kind !== "unauthorized" && res.kind !== "too_many_watches") setStatus("failed");
      showAlert($("job-error"), res.kind, res.error);
      if (res.kind === "unauthorized" && tokenField) tokenField.focus();
    }
  });
}

// Cancel: the router stops the job at its next step; the next "job" event says cancelled.
$("cancel-job").addEventListener("click", () => {
  if (!state.job) return;
  fetch("/api/jobs/" + encodeURIComponent(state.job.id) + "/cancel", { method: "POST", headers: authHeaders() })
    .then((r) => r.json())
    .then((res) => {
      if (res.ok === false) showAlert($("job-error"), res.kind, res.error);
    })
    .catch(() => showAlert($("job-error"), "unavailable", "the server did not answer"));
});

export function setStatus(status, degraded) {
  $("cancel-job").hidden = !(status === "queued" || status === "running");
  const badge = $("job-status");
  badge.hidden = false;
  badge.textContent = degraded ? status + " · degraded" : status;
  badge.className = "badge badge-" + status + (degraded ? " badge-degraded" : "");
  badge.title = degraded ? "degraded: " + degraded : "";
}

// A queued job's place and the estimate of when it starts (from the throughput measured over recent
// jobs: an estimate, and said so); the server words it as `ddm status` does.
export function showQueue(place) {
  const p = $("job-queue");
  p.hidden = !place;
  p.textContent = place ? "In the queue: " + place.text + "." : "";
  p.dataset.position = place ? String(place.position) : "";
}

export function setupJob(info) {
  const job = state.job;
  if (info.steps && job.steps !== info.steps) job.steps = info.steps;
  if (info.prompt !== undefined) {
    job.prompt = info.prompt;
    job.negativePrompt = info.negative_prompt ?? null;
  }
  if (info.labels && info.labels.length) {
    job.labels = promptOf(job) === null ? info.labels : []; // a text job's images: #1, #2, ...
    job.n = info.labels.length;
  }
  if (info.label_names && info.label_names.length === job.labels.length) job.labelNames = info.label_names;
  if (!job.n && info.n) job.n = info.n;
  const distinct = new Set(job.labels).size || 1;
  job.cols = Math.max(1, Math.min(job.n || 1, distinct)); // 11 at most: the classes and unconditional
  if (job.canvases.length !== job.n && job.n) buildTiles();
  else relabelTiles();
  buildStrip();
  const title = "Job " + job.id.slice(0, 8);
  $("job-title").textContent = title;
  const bits = [];
  const of = promptOf(job) === null ? " of " + labelsText(job.labels, job.labelNames) : "";
  if (job.n) bits.push(job.n + " image" + (job.n === 1 ? "" : "s") + of);
  if (info.strategy) bits.push(info.strategy);
  // the solver, grid and evaluations the router resolved (before it starts: what the job asked for)
  if (info.solver || info.grid) {
    bits.push((info.solver || "the default solver") + " on the " + (info.grid || "default") + " grid");
  }
  if (job.steps && info.nfe) bits.push(evaluationsText(job.steps, info.nfe / job.steps));
  else if (job.steps) bits.push(job.steps + " steps");
  if (info.nfe) $("stage").dataset.nfe = String(info.nfe);
  if (info.guidance !== undefined && info.guidance !== null) bits.push("guidance " + info.guidance);
  if (info.seed !== undefined && info.seed !== null) bits.push("seed " + info.seed);
  if (info.priority) bits.push("priority " + info.priority); // 0, the default, goes unsaid
  $("job-sub").textContent = bits.join(" · ");
  // the prompt, as text (never markup): the job's own, whatever the form holds now
  const prompt = promptOf(job);
  $("job-prompt").hidden = prompt === null;
  $("job-prompt").textContent = prompt === null ? "" : promptText(prompt, job.negativePrompt);
  updateProgress();
  announce("ddm:job", { id: job.id });
}

export function updateProgress() {
  const job = state.job;
  const pct = job && job.steps ? (100 * job.lastStep) / job.steps : 0;
  $("progress-bar").style.width = pct.toFixed(1) + "%";
  const scrub = $("scrub");
  scrub.max = String(Math.max(1, job ? job.lastStep : 1));
  $("scrub-row").hidden = !job || job.lastStep === 0;
  $("strip").dataset.frames = String(job ? job.framesSeen : 0);
}

// a reload: watch the job again once connected (the server replays its steps)
export function watchFromHash() {
  const m = /^#job=([A-Za-z0-9_-]{1,64})$/.exec(location.hash);
  if (!m) return;
  state.job = newJob(m[1], null);
  $("stage").dataset.jobId = m[1];
  $("job-title").textContent = "Job " + m[1].slice(0, 8);
}
