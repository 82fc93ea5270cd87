// ddm web UI: the serving deployment's facts as the page words them: class names, experts, what its
// strategies, solvers and grids do (/api/config's hints: the page never parses a strategy itself), and
// the shape its samples are drawn at.

import { $, el, expertColor } from "./dom.js";
import { state } from "./state.js";

// One sample's [C, H, W] until the deployment (its sample_space) or a frame says otherwise: the legacy
// 1x32x32. Tiles are drawn as whole-pixel upscales up to MAX_TILE_PX (8x at 32 px, 4x at 64 px).
export const LEGACY_SHAPE = [1, 32, 32];
export const MAX_TILE_PX = 256;

export function className(y) {
  if (y === null || y === state.nullLabel) return state.nullName; // null: how a job says it; K: older jobs
  return state.classNames[y] !== undefined ? state.classNames[y] : String(y);
}

// Image i of a job by its own deployment's names: the job payload's label_names (parallel to its labels;
// null for a job from before the record), else the serving deployment's class names.
export function labelName(job, i) {
  const names = job.labelNames;
  if (names && names[i] !== undefined && names[i] !== null) return names[i];
  return className(job.labels[i]);
}

// A job's labels in a few words: "3 7" (digits), "Dress, Bag", "all 10", "3, unconditional". names: the
// job's label_names (its own deployment's; null: the serving deployment's class names).
export function labelsText(labels, names) {
  const { classNames, nullLabel, nullName } = state;
  const named = new Map();
  (labels || []).forEach((y, i) => names && names[i] !== undefined && names[i] !== null && named.set(y, names[i]));
  const nameOf = (y) => (named.has(y) ? named.get(y) : className(y));
  // the job's own null label is the one it names "unconditional" (its deployment's class count)
  const isNull = (y) => (named.has(y) ? named.get(y) === nullName : y === null || y === nullLabel);
  const uniq = Array.from(new Set(labels || [])).sort((a, b) => a - b);
  const classes = uniq.filter((y) => !isNull(y));
  // "all N" only where the names are the serving deployment's (another deployment's N is not known)
  const own = classes.every((y) => nameOf(y) === className(y));
  const all = own && classes.length === classNames.length;
  const digits = classes.every((y) => nameOf(y) === String(y));
  const parts = all ? ["all " + classes.length] : classes.map(nameOf);
  if (classes.length < uniq.length) parts.push(nullName);
  return parts.join(digits && !all ? " " : ", ");
}

// A text job's prompt (null: a class job, or a text job with the empty prompt: its label names it)
export function promptOf(job) {
  return job && job.prompt !== undefined && job.prompt !== null ? job.prompt : null;
}

// "“a red apple”", and what guidance steered away from: "“a red apple” · not “blurry”"
export function promptText(prompt, negative) {
  return "“" + prompt + "”" + (negative ? " · not “" + negative + "”" : "");
}

export function strategyHint(s) {
  if (!s) return "the serving deployment's default strategy";
  const dep = state.deployment;
  return (dep && dep.strategy_hints && dep.strategy_hints[s]) || "";
}

// the solvers and grids likewise (/api/config: solver_hints, grid_hints, and solver_stages: the
// evaluations each step of a solver costs, schema/solver.py's numbers)
export function samplingHint(kind, name) {
  if (!name) return "the serving deployment's default " + (kind === "solver" ? "solver" : "time grid");
  const hints = state.deployment && state.deployment[kind + "_hints"];
  return (hints && hints[name]) || "";
}

export function solverStages(name) {
  const stages = state.deployment && state.deployment.solver_stages;
  return stages && stages[name] ? stages[name] : null;
}

// what a deployment serves; a descriptor without "sampling" (a router from before solvers): Euler on
// the uniform grid only
export function samplingOf(dep) {
  const s = dep && dep.sampling;
  if (s && s.solvers && s.solvers.length && s.grids && s.grids.length) return s;
  return { solvers: ["euler"], grids: ["uniform"], default_solver: "euler", default_grid: "uniform" };
}

// "8 steps × 2 = 16 evaluations" (one evaluation per step: "50 steps · 50 evaluations")
export function evaluationsText(steps, stages) {
  if (typeof steps !== "number" || !stages) return (steps ?? "?") + " steps";
  const nfe = steps * stages;
  const evals = nfe + " evaluation" + (nfe === 1 ? "" : "s");
  return steps + " step" + (steps === 1 ? "" : "s") + (stages > 1 ? " × " + stages + " = " : " · ") + evals;
}

// the shape [C, H, W] the serving deployment's images are drawn at (a latent deployment's: its decoder's
// pixels, which its previews are drawn at too), else its sample shape, else the legacy one
export function sampleShape() {
  const dep = state.deployment;
  const image = dep && dep.image_shape;
  if (image && image.length === 3) return image.slice();
  const space = dep && dep.sample_space;
  return space && space.shape && space.shape.length === 3 ? space.shape.slice() : LEGACY_SHAPE.slice();
}

export function expertLabel(k) {
  const e = state.experts[k];
  const live = state.liveDevices[k];
  const devices = live && live.size ? Array.from(live).join("+") : e && e.device;
  const parts = ["expert " + k];
  if (e) parts.push(e.framework);
  if (devices) parts.push(devices);
  return parts.join(" · ");
}

// the server's words (webui/jobs.py trained_on): '0-4', or a k-means cluster's largest label shares
export function trainedOnText(e) {
  return e && e.trained_on ? "trained on " + e.trained_on : "";
}

export function renderLegend() {
  const legend = $("legend");
  legend.replaceChildren();
  const ids = Object.keys(state.experts).map(Number).sort((a, b) => a - b);
  for (const k of ids) {
    const item = el("span", "legend-item");
    const sw = el("span", "swatch");
    sw.style.background = expertColor(k);
    item.append(sw, el("span", null, expertLabel(k)));
    const cls = trainedOnText(state.experts[k]);
    if (cls) item.append(el("span", "muted", " · " + cls));
    legend.append(item);
  }
}
