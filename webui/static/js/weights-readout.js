// ddm web UI, the router's weights per image: the readout (one labelled bar per expert for the step
// under the cursor, else the step the tiles show) and the table (one row per step of the chosen image).

import { $, el, expertColor } from "./dom.js";
import { expertLabel } from "./facts.js";
import { imageName, numExperts, pct, readoutStep, servedBy, tRead, view } from "./weights-common.js";

export function drawReadout(job) {
  const box = $("weights-now");
  box.replaceChildren();
  const step = readoutStep(job);
  if (!step) return;
  const f = job.frames[step];
  const w = f.weights[view.image] || [];
  const who = servedBy(f, view.image);
  box.dataset.step = String(step);
  const head = el("div", "wnow-head");
  head.append(
    el("span", "wnow-title", "step " + step + " of " + job.steps + " · the router read t = " + tRead(job, step).toFixed(3)),
    el("span", "hint", imageName(job, view.image) + " · served: " + (who.map((k) => "expert " + k).join(", ") || "none"))
  );
  box.append(head);
  const K = numExperts(job);
  for (let k = 0; k < K; k++) {
    const weight = w[k] || 0;
    const served = who.includes(k);
    const row = el("div", "wnow-row" + (served ? " served" : ""));
    row.dataset.expert = String(k);
    row.dataset.weight = weight.toFixed(3);
    row.dataset.served = served ? "1" : "0";
    const name = el("div", "wnow-name");
    const sw = el("span", "swatch");
    sw.style.background = expertColor(k);
    name.append(sw, el("span", null, expertLabel(k)));
    const track = el("div", "wnow-track");
    track.setAttribute("role", "meter");
    track.setAttribute("aria-valuemin", "0");
    track.setAttribute("aria-valuemax", "100");
    track.setAttribute("aria-valuenow", (100 * weight).toFixed(1));
    track.setAttribute("aria-label", "weight of expert " + k);
    const fill = el("div", "wnow-fill");
    fill.style.width = (100 * weight).toFixed(1) + "%";
    fill.style.background = expertColor(k);
    track.append(fill);
    let tag = served ? "served" : weight > 0 ? "chosen, not served" : "not served";
    if (f.missing.includes(k)) tag = "left out: no live worker";
    row.append(name, track, el("span", "wnow-pct mono", pct(weight)), el("span", "wnow-tag" + (served ? " ok" : ""), tag));
    box.append(row);
  }
}

// ------------------------------------------------------------------ the table: one row per step

function tableRow(job, s) {
  const f = job.frames[s];
  const w = f.weights[view.image] || [];
  const who = servedBy(f, view.image);
  const tr = el("tr");
  tr.dataset.step = String(s);
  tr.dataset.t = tRead(job, s).toFixed(4);
  tr.dataset.weights = w.map((x) => x.toFixed(3)).join(",");
  tr.dataset.served = who.join(",");
  tr.append(el("td", "mono", s), el("td", "mono", tRead(job, s).toFixed(3)));
  for (let k = 0; k < w.length; k++) tr.append(el("td", "mono" + (who.includes(k) ? " ok" : ""), pct(w[k])));
  tr.append(el("td", null, who.map((k) => "expert " + k).join(", ") || "none"));
  return tr;
}

export function drawTable(job) {
  const body = $("weights-rows");
  const K = numExperts(job);
  const head = $("weights-head");
  if (view.table.image !== view.image || view.table.jobId !== job.id || head.children.length !== K + 3) {
    body.replaceChildren();
    head.replaceChildren(el("th", null, "step"), el("th", null, "t read"));
    for (let k = 0; k < K; k++) head.append(el("th", null, "expert " + k));
    head.append(el("th", null, "served"));
    view.table = { image: view.image, jobId: job.id, rows: 0 };
  }
  for (let s = view.table.rows + 1; s <= job.lastStep; s++) {
    if (!job.frames[s] || !job.frames[s].weights[view.image]) break;
    body.append(tableRow(job, s));
    view.table.rows = s;
  }
}
