// ddm web UI: what the socket says about the watched job: its status ("job") and each step ("frame"),
// and watching it again after a reconnect.

import { $, announce, b64ToBytes, showAlert } from "./dom.js";
import { state } from "./state.js";
import { LEGACY_SHAPE } from "./facts.js";
import { setDownload } from "./auth.js";
import { socket } from "./connection.js";
import { buildTiles, drawFrame, scheduleDraw } from "./tiles.js";
import { buildStrip, fillCell } from "./strip.js";
import { sendWatch, setStatus, setupJob, showDecoded, showQueue, updateProgress } from "./job.js";

socket.on("connect", () => {
  if (state.job) sendWatch();
});

socket.on("job", (info) => {
  const job = state.job;
  if (!job || info.job_id !== job.id) return;
  job.status = info.status;
  setStatus(info.status, info.degraded);
  setupJob(info);
  showQueue(info.status === "queued" ? info.queue : null);
  const note = $("job-degraded");
  note.hidden = !info.degraded;
  note.textContent = info.degraded ? "Degraded: " + info.degraded + ". These images are not the full model." : "";
  if (info.status === "done" && info.result_png) {
    const a = $("download");
    setDownload(a, info.result_png + "?download=1", "ddm-" + job.id + ".png");
    a.hidden = false;
    $("stage").dataset.done = "1";
    if (job.lastStep) drawFrame(job.follow ? job.lastStep : job.shown || job.lastStep);
    if (state.deployment && state.deployment.decoder && !job.decoded) showDecoded(job);
  } else if (info.status === "failed" || info.status === "expired") {
    showAlert($("job-error"), "failed", info.error || "the router gave no reason");
  }
});

socket.on("frame", (f) => {
  const job = state.job;
  if (!job || f.job_id !== job.id) return;
  if (f.step <= job.lastStep) return; // already have it (a reconnect replays from the start)
  if (!job.n) {
    job.n = f.n;
    setupJob({ n: f.n });
  }
  const shape = f.shape || LEGACY_SHAPE; // a server from before sample spaces sent 1x32x32 only
  if (shape.join("x") !== job.shape.join("x")) {
    job.shape = shape.slice(); // the job's own frames say what they are (a deployment changed since)
    if (job.n) buildTiles();
  }
  const rec = {
    step: f.step,
    t: f.t,
    experts: f.experts,
    missing: f.missing || [],
    weights: f.weights,
    served: f.served || null, // [n] experts that computed each image (weights are rounded)
    latency_ms: f.latency_ms,
    compute_ms: f.compute_ms,
    pixels: f.pixels ? b64ToBytes(f.pixels) : null,
    channels: f.channels || 1,
    preview: !!f.preview, // a latent deployment's linear preview, not a decoding
  };
  job.frames[f.step] = rec;
  job.lastStep = f.step;
  job.framesSeen += 1;
  if (job.steps < f.step) {
    job.steps = f.step;
    buildStrip();
  }
  fillCell(rec);
  updateProgress();
  if (job.follow) scheduleDraw();
  announce("ddm:frame", { id: job.id, step: f.step });
});
