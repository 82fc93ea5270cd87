// ddm web UI: scrubbing and replaying the watched job's steps on its tiles.

import { $ } from "./dom.js";
import { state } from "./state.js";
import { drawFrame } from "./tiles.js";

let playing = null; // interval id while replaying

export function stopPlaying() {
  if (playing !== null) clearInterval(playing);
  playing = null;
  $("play").textContent = "▶";
}

$("scrub").addEventListener("input", () => {
  const job = state.job;
  if (!job) return;
  stopPlaying();
  const step = Number($("scrub").value);
  job.follow = step >= job.lastStep;
  drawFrame(step);
});

$("play").addEventListener("click", () => {
  const job = state.job;
  if (!job || !job.lastStep) return;
  if (playing !== null) return stopPlaying();
  let step = 1;
  job.follow = false;
  $("play").textContent = "❚❚";
  const every = Math.max(16, Math.min(120, 3000 / job.lastStep));
  playing = setInterval(() => {
    drawFrame(step);
    step += 1;
    if (step > job.lastStep) {
      stopPlaying();
      job.follow = true;
    }
  }, every);
});
