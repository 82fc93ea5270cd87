// ddm web UI: the watched job's images, one canvas per image, upscaled by whole pixels to fit the stage,
// drawn from the newest frame (or the step scrubbed to).

import { $, announce, el, expertColor } from "./dom.js";
import { state } from "./state.js";
import { MAX_TILE_PX, expertLabel, labelName, sampleShape } from "./facts.js";

export function tileLayout() {
  // the largest whole-pixel upscale that fits the stage: its width, and a height that grows with the
  // window (a few tiles in a tall window are large, many are smaller). Images come row by row, one
  // column per label, so several images per label take a multiple of the labels as columns (column c:
  // label c mod labels); one label alone (or unconditional) may take any column count. Only a row that
  // fits the stage's width is a candidate (tiles wrap into rows, never past the box: issue 40); where no
  // multiple of the labels fits, any column count may; where not even one tile fits at 1x, one column
  // (the CSS shrinks it to the box).
  const job = state.job;
  const W = $("tiles").clientWidth || 600;
  const distinct = new Set(job.labels).size;
  const perLabel = distinct > 1 && job.labels.length > distinct;
  const last = Math.max(job.cols, job.n);
  return (
    bestLayout(W, perLabel ? job.cols : 1, perLabel ? job.cols : 1, last) ||
    (perLabel && bestLayout(W, 1, 1, last)) || { cols: 1, scale: 1, empty: job.n - 1 }
  );
}

// the best of cols = first, first + step, ... up to last that fits width W at a whole scale (null: none)
function bestLayout(W, first, step, last) {
  const job = state.job;
  const H = Math.max(360, Math.min(1000, Math.round(window.innerHeight * 0.75)));
  const ih = job.shape[1];
  const iw = job.shape[2];
  const maxScale = Math.max(1, Math.floor(MAX_TILE_PX / Math.max(ih, iw)));
  const caption = 24;
  let best = null;
  for (let cols = first; cols <= last; cols += step) {
    const rows = Math.ceil(job.n / cols);
    const gap = tileGap(cols);
    const byW = Math.floor((W - gap * (cols - 1)) / cols / iw);
    if (byW < 1) continue; // this row is wider than the stage
    const byH = Math.floor((H - rows * (gap + caption)) / rows / ih);
    const scale = Math.max(1, Math.min(maxScale, byW, byH));
    const empty = rows * cols - job.n; // prefer full rows (10 images: 5 x 2, not 6 + 4)
    const better =
      !best ||
      scale > best.scale ||
      (scale === best.scale && (empty < best.empty || (empty === best.empty && cols > best.cols)));
    if (better) best = { cols, scale, empty };
  }
  return best;
}

function tileGap(cols) {
  return cols >= 8 ? 6 : 10;
}

export function buildTiles() {
  const job = state.job;
  const tiles = $("tiles");
  tiles.replaceChildren();
  job.canvases = [];
  job.bars = [];
  const layout = tileLayout();
  job.layout = layout;
  const scale = layout.scale;
  const ih = job.shape[1];
  const iw = job.shape[2];
  // at most the tile's pixels wide, and never wider than the box allows (app.css shrinks the canvas)
  tiles.style.gridTemplateColumns = "repeat(" + layout.cols + ", minmax(0, " + iw * scale + "px))";
  tiles.dataset.shape = job.shape.join("x"); // what the tiles are sized for (tests read it)
  tiles.style.gap = tileGap(layout.cols) + "px";
  for (let i = 0; i < job.n; i++) {
    const tile = el("figure", "tile");
    const canvas = el("canvas", "tile-canvas");
    canvas.width = iw * scale;
    canvas.height = ih * scale;
    const ctx = canvas.getContext("2d");
    ctx.fillStyle = "#0b0e13";
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    const bar = el("div", "tile-bar");
    const cap = el("figcaption", "tile-cap", tileCaption(job, i));
    cap.title = cap.textContent; // a long class name under a small tile is cut short (app.css)
    tile.append(canvas, bar, cap);
    tiles.append(tile);
    job.canvases.push(canvas);
    job.bars.push(bar);
  }
  job.scratch = document.createElement("canvas");
  job.scratch.width = iw;
  job.scratch.height = ih;
  job.shown = 0;
}

function tileCaption(job, i) {
  return job.labels.length ? labelName(job, i) : "#" + (i + 1);
}

// the captions again (the job's label names arrived, or the serving deployment's names changed)
export function relabelTiles() {
  const job = state.job;
  if (!job) return;
  const caps = $("tiles").querySelectorAll(".tile-cap");
  caps.forEach((cap, i) => (cap.title = cap.textContent = tileCaption(job, i)));
}

// a job watched before the deployment was known (a #job= link) has tiles of the legacy size: until
// its first frame says what it is, size them by this deployment's samples
export function tilesForDeployment() {
  const job = state.job;
  if (job && !job.lastStep && job.shape.join("x") !== sampleShape().join("x")) {
    job.shape = sampleShape();
    if (job.n) buildTiles();
  }
  relabelTiles();
}

export function drawFrame(step) {
  const job = state.job;
  // the newest frame at or before `step` that carries pixels (a long replay thins them out)
  let f = null;
  for (let s = step; s >= 1; s--) {
    if (job.frames[s] && job.frames[s].pixels) {
      f = job.frames[s];
      break;
    }
  }
  if (job.decoded && step >= job.lastStep) f = job.decoded; // the decoder's picture, not the preview
  const ih = job.shape[1];
  const iw = job.shape[2];
  const area = ih * iw;
  if (!f) return;
  const ch = f.channels; // 1: greyscale bytes, 3: RGB interleaved (webui/pixels.py)
  if (job.canvases.length !== f.pixels.length / (area * ch)) return;
  const sctx = job.scratch.getContext("2d");
  const img = sctx.createImageData(iw, ih);
  const meta = job.frames[step] || f;
  for (let i = 0; i < job.canvases.length; i++) {
    const px = f.pixels.subarray(i * area * ch, (i + 1) * area * ch);
    for (let p = 0; p < area; p++) {
      const q = p * ch;
      img.data[4 * p] = px[q];
      img.data[4 * p + 1] = px[q + (ch === 3 ? 1 : 0)];
      img.data[4 * p + 2] = px[q + (ch === 3 ? 2 : 0)];
      img.data[4 * p + 3] = 255;
    }
    sctx.putImageData(img, 0, 0);
    const canvas = job.canvases[i];
    const ctx = canvas.getContext("2d");
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(job.scratch, 0, 0, canvas.width, canvas.height);
    const w = meta.weights[i] || [];
    let best = 0;
    for (let k = 1; k < w.length; k++) if (w[k] > w[best]) best = k;
    job.bars[i].style.background = expertColor(best);
    job.bars[i].title = expertLabel(best) + " · weight " + (w[best] ?? 0).toFixed(2) + " at step " + meta.step;
  }
  job.shown = step;
  announce("ddm:shown", { id: job.id, step: step });
  $("scrub").value = String(step);
  const what = f.decoded ? " · decoded" : f.preview ? " · preview" : "";
  $("scrub-label").textContent = "step " + step + " / " + job.steps + " · t = " + meta.t.toFixed(3) + what;
}

let drawPending = false;
export function scheduleDraw() {
  if (drawPending) return;
  drawPending = true;
  requestAnimationFrame(() => {
    drawPending = false;
    const job = state.job;
    if (job && job.follow && job.lastStep) drawFrame(job.lastStep);
  });
}

// a new width may take another scale or another column count (narrower: fewer columns, more rows)
window.addEventListener("resize", () => {
  const job = state.job;
  if (!job || !job.n) return;
  const now = tileLayout();
  if (!job.layout || !job.canvases.length || job.layout.scale !== now.scale || job.layout.cols !== now.cols) {
    buildTiles();
    if (job.lastStep) drawFrame(job.follow ? job.lastStep : job.shown || job.lastStep);
  }
});
