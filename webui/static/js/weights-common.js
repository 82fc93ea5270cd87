// ddm web UI, the router's weights per image: what the chart, the readout, the table and the small
// multiples share: which image and step they show, and how a job's frames read (the t the router read,
// the experts that served an image).

import { state } from "./state.js";
import { labelName } from "./facts.js";

export const SVG = "http://www.w3.org/2000/svg";
// the main chart's drawing box (viewBox units)
export const VW = 600;
export const PLOT = { x0: 50, x1: 594, y0: 8, y1: 150 };
export const RIBBON = { y0: 157, y1: 169 };
export const VH = 173;

export const view = {
  jobId: null,
  image: 0, // the image followed by the big chart
  cursor: null, // a step pointed at (mouse or keys); null: the step the tiles show
  shown: 0, // the step the tiles show
  table: { jobId: null, image: -1, rows: 0 }, // what the table holds
  drawPending: false,
  forceMinis: false,
  miniTimer: null,
  miniAt: 0,
};

export function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  return node;
}

export const pct = (w) => (100 * w).toFixed(1) + "%";

export function current() {
  const job = state.job;
  return job && job.id === view.jobId ? job : null;
}

export function numExperts(job) {
  for (const f of job.frames) if (f && f.weights && f.weights.length) return f.weights[0].length;
  return Object.keys(state.experts).length;
}

// the t the router read at `step` (1-based): the t of the step before (0 at step 1)
export function tRead(job, step) {
  if (step <= 1) return 0;
  const before = job.frames[step - 1];
  return before ? before.t : (step - 1) / Math.max(1, job.steps);
}

export function tAfter(job, step) {
  const f = job.frames[step];
  return f ? f.t : step / Math.max(1, job.steps);
}

// the experts that computed image i's velocity at a step (the server says, from the unrounded
// weights; else: weight > 0 and listed by the frame)
export function servedBy(f, i) {
  if (f.served && f.served[i]) return f.served[i];
  const w = f.weights[i] || [];
  return f.experts.filter((k) => (w[k] || 0) > 0);
}

export function imageName(job, i) {
  const label = job.labels && job.labels.length ? labelName(job, i) : null;
  return "image " + (i + 1) + (label !== null ? " · " + label : "");
}

export function topExpert(w) {
  let best = 0;
  for (let k = 1; k < w.length; k++) if (w[k] > w[best]) best = k;
  return best;
}


export function readoutStep(job) {
  const want = view.cursor !== null ? view.cursor : view.shown || job.lastStep;
  const step = Math.max(0, Math.min(want, job.lastStep));
  return job.frames[step] ? step : 0;
}
