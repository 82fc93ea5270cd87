// ddm web UI: the strip under the tiles: one bar per step, coloured by the experts that served it
// (their mean weight), and its tooltip: the step's latency, compute and the router's weights per image.

import { $, el, expertColor } from "./dom.js";
import { state } from "./state.js";
import { expertLabel, labelName } from "./facts.js";

export function buildStrip() {
  const job = state.job;
  const strip = $("strip");
  if (Number(strip.dataset.steps) === job.steps && strip.dataset.jobId === job.id) return;
  strip.replaceChildren();
  strip.dataset.steps = String(job.steps || 0);
  strip.dataset.frames = "0";
  strip.dataset.jobId = job.id;
  for (let s = 1; s <= job.steps; s++) {
    const cell = el("div", "cell");
    cell.dataset.step = String(s);
    strip.append(cell);
  }
  for (const f of job.frames) if (f) fillCell(f);
  $("strip-note").textContent = job.steps > 200 ? "one bar per step (" + job.steps + ")" : "";
}

function meanWeights(weights) {
  const K = weights.length ? weights[0].length : 0;
  const mean = new Array(K).fill(0);
  for (const row of weights) for (let k = 0; k < K; k++) mean[k] += row[k] / weights.length;
  return mean;
}

export function fillCell(f) {
  const cell = $("strip").children[f.step - 1];
  if (!cell) return;
  cell.replaceChildren();
  cell.classList.add("filled");
  // degraded: an expert the routing chose had no live worker, and the step mixed the others
  cell.classList.toggle("degraded", f.missing.length > 0);
  const mean = meanWeights(f.weights);
  for (let k = 0; k < mean.length; k++) {
    if (mean[k] <= 0) continue;
    const seg = el("div", "seg");
    seg.style.height = (mean[k] * 100).toFixed(2) + "%";
    seg.style.background = expertColor(k);
    cell.append(seg);
  }
}

// ------------------------------------------------------------------ tooltip

const tooltip = $("tooltip");

function tooltipFor(job, step) {
  const f = job.frames[step];
  tooltip.replaceChildren();
  tooltip.append(el("div", "tt-title", "step " + step + " of " + job.steps + (f ? " · t = " + f.t.toFixed(3) : "")));
  if (!f) {
    tooltip.append(el("div", "muted", "not computed yet"));
    return;
  }
  tooltip.append(
    el("div", null, "step " + f.latency_ms.toFixed(1) + " ms, of which expert compute " +
      f.compute_ms.toFixed(1) + " ms")
  );
  if (f.missing.length) {
    tooltip.append(
      el("div", "tt-degraded", "degraded: " + f.missing.map(expertLabel).join(", ") +
        " had no live worker; the step mixed the others")
    );
  }
  const mean = meanWeights(f.weights);
  for (let k = 0; k < mean.length; k++) {
    const served = f.weights.filter((w) => w[k] > 0).length;
    if (!served && !f.experts.includes(k)) continue;
    const row = el("div", "tt-row");
    const sw = el("span", "swatch");
    sw.style.background = expertColor(k);
    row.append(sw, el("span", null, expertLabel(k) + " — mean weight " + mean[k].toFixed(2) + ", " + served + "/" + f.weights.length + " images"));
    tooltip.append(row);
  }
  // the router's weights per image, images with the same weights grouped: "5, 6, 7 → e1 1.00"
  const groups = new Map();
  f.weights.forEach((w, i) => {
    const key = w.map((x, k) => (x > 0 ? "e" + k + " " + x.toFixed(2) : null)).filter(Boolean).join(", ");
    const label = job.labels.length ? labelName(job, i) : "#" + (i + 1);
    if (!groups.has(key)) groups.set(key, []);
    if (!groups.get(key).includes(label)) groups.get(key).push(label);
  });
  const lines = Array.from(groups.entries())
    .slice(0, 12)
    .map(([key, labels]) => (job.labels.length ? "" : "image ") + labels.join(", ") + " → " + key);
  if (groups.size > 12) lines.push("… " + (groups.size - 12) + " more");
  tooltip.append(el("div", "tt-weights mono", "router weights\n" + lines.join("\n")));
}

$("strip").addEventListener("mousemove", (ev) => {
  const cell = ev.target.closest(".cell");
  const job = state.job;
  if (!cell || !job) return (tooltip.hidden = true);
  tooltipFor(job, Number(cell.dataset.step));
  tooltip.hidden = false;
  const pad = 14;
  let x = ev.clientX + pad;
  let y = ev.clientY + pad;
  const r = tooltip.getBoundingClientRect();
  if (x + r.width > window.innerWidth - 8) x = ev.clientX - r.width - pad;
  if (y + r.height > window.innerHeight - 8) y = ev.clientY - r.height - pad;
  tooltip.style.left = x + "px";
  tooltip.style.top = y + "px";
});
$("strip").addEventListener("mouseleave", () => (tooltip.hidden = true));
