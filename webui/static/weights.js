// ddm web UI: the router's weights per image, step by step (plain SVG, no library, no fetch).
//
// Every frame carries weights [n][K] (the share of each expert in each image's velocity at that step) and
// the experts that served the step. For the chosen image this draws a stacked area over t (x: the t the
// router read, 0 noise .. 1 image; y: weight, one colour per expert, the colours of the strip), a ribbon
// under it with the experts that actually served that image, and, for the step under the cursor (else
// the step the tiles show), one labelled bar per expert with its weight in % and whether it served. A
// small chart per image of the job picks the image. The numbers are text too: the readout, a <title>
// per area, and a table (one row per step, with data-step, data-t, data-weights, data-served).
//
// This entry module draws them, throttled, and follows the watched job by the "ddm:*" events app.js's
// modules announce (js/weights-chart.js, js/weights-readout.js and js/weights-minis.js draw; the job is
// js/state.js's). Everything is put into the page with textContent or setAttribute, never as markup.

import { $ } from "./js/dom.js";
import { PLOT, VW, current, imageName, readoutStep, tAfter, view } from "./js/weights-common.js";
import { drawChart, drawFlatNote } from "./js/weights-chart.js";
import { drawReadout, drawTable } from "./js/weights-readout.js";
import { drawMinis } from "./js/weights-minis.js";

const MINI_EVERY_MS = 250; // small multiples redraw at most this often while frames arrive

function draw(forceMinis) {
  const job = current();
  const wrap = $("weights");
  if (!job || !job.n) {
    wrap.hidden = true;
    return;
  }
  wrap.hidden = false;
  if (view.image >= job.n) view.image = 0;
  $("weights-image").textContent = imageName(job, view.image);
  drawChart(job);
  drawFlatNote(job);
  drawReadout(job);
  drawTable(job);
  markTile();
  if (forceMinis || Date.now() - view.miniAt >= MINI_EVERY_MS) {
    drawMinis(job, select);
  } else if (view.miniTimer === null) {
    view.miniTimer = setTimeout(() => {
      view.miniTimer = null;
      const j = current();
      if (j && j.n) drawMinis(j, select);
    }, MINI_EVERY_MS);
  }
}

function schedule(forceMinis) {
  if (forceMinis) view.forceMinis = true;
  if (view.drawPending) return;
  view.drawPending = true;
  requestAnimationFrame(() => {
    view.drawPending = false;
    const force = view.forceMinis;
    view.forceMinis = false;
    draw(force);
  });
}

function select(i) {
  view.image = i;
  schedule(true);
}

function markTile() {
  const tiles = $("tiles").children;
  for (let i = 0; i < tiles.length; i++) {
    tiles[i].classList.toggle("tile-selected", i === view.image);
    tiles[i].dataset.image = String(i);
  }
}

// ------------------------------------------------------------------ events

function follow(detail) {
  if (!detail || detail.id !== view.jobId) {
    view.jobId = detail ? detail.id : null;
    view.image = 0;
    view.cursor = null;
    view.shown = 0;
    view.table = { jobId: null, image: -1, rows: 0 };
    $("weights-minis").replaceChildren();
  }
}

document.addEventListener("ddm:job", (ev) => {
  follow(ev.detail);
  schedule(true);
});
document.addEventListener("ddm:frame", (ev) => {
  follow(ev.detail);
  schedule(false);
});
document.addEventListener("ddm:shown", (ev) => {
  follow(ev.detail);
  view.shown = ev.detail.step;
  schedule(false);
});
document.addEventListener("ddm:deployment", () => schedule(true));

// a tile picks its image too
$("tiles").addEventListener("click", (ev) => {
  const tile = ev.target.closest(".tile");
  if (tile && tile.dataset.image !== undefined) select(Number(tile.dataset.image));
});

// the cursor: the mouse over the chart, or the arrow keys once it has focus
const chart = $("weights-chart");
function stepAt(ev) {
  const job = current();
  if (!job || !job.lastStep) return null;
  const r = chart.getBoundingClientRect();
  const t = ((ev.clientX - r.left) / r.width * VW - PLOT.x0) / (PLOT.x1 - PLOT.x0);
  for (let s = 1; s <= job.lastStep; s++) if (t < tAfter(job, s)) return s;
  return job.lastStep;
}
chart.addEventListener("mousemove", (ev) => {
  const s = stepAt(ev);
  if (s !== null && s !== view.cursor) {
    view.cursor = s;
    schedule(false);
  }
});
chart.addEventListener("mouseleave", () => {
  view.cursor = null;
  schedule(false);
});
chart.addEventListener("blur", () => {
  view.cursor = null;
  schedule(false);
});
chart.addEventListener("keydown", (ev) => {
  const job = current();
  if (!job || !job.lastStep) return;
  const at = view.cursor !== null ? view.cursor : readoutStep(job) || 1;
  const moves = { ArrowLeft: at - 1, ArrowRight: at + 1, Home: 1, End: job.lastStep };
  if (!(ev.key in moves)) return;
  ev.preventDefault();
  view.cursor = Math.max(1, Math.min(job.lastStep, moves[ev.key]));
  schedule(false);
});
