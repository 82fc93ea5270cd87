// ddm web UI, the router's weights per image: the small multiples, one small chart per image of the
// job (at most MINI.cols columns over t); a click on one follows that image.

import { $, el, expertColor } from "./dom.js";
import { labelName } from "./facts.js";
import { imageName, numExperts, pct, svg, tAfter, tRead, topExpert, view } from "./weights-common.js";

const MINI = { w: 120, h: 34, cols: 60 }; // a small multiple: at most 60 columns, steps averaged

function miniPaths(job, i, K) {
  // at most MINI.cols columns over t: the steps of a column averaged
  const last = job.lastStep;
  const cols = Math.min(MINI.cols, last);
  const top = [];
  const bottom = [];
  for (let k = 0; k < K; k++) {
    top.push([]);
    bottom.push([]);
  }
  for (let c = 0; c < cols; c++) {
    const a = Math.floor((c * last) / cols) + 1;
    const b = Math.floor(((c + 1) * last) / cols);
    const mean = new Array(K).fill(0);
    let count = 0;
    for (let s = a; s <= b; s++) {
      const w = job.frames[s] && job.frames[s].weights[i];
      if (!w) continue;
      for (let k = 0; k < K; k++) mean[k] += w[k] || 0;
      count += 1;
    }
    if (!count) continue;
    const xa = ((tRead(job, a) * MINI.w)).toFixed(1);
    const xb = ((tAfter(job, b) * MINI.w)).toFixed(1);
    let below = 0;
    for (let k = 0; k < K; k++) {
      const above = below + mean[k] / count;
      const yt = (MINI.h * (1 - Math.min(1, above))).toFixed(1);
      const yb = (MINI.h * (1 - Math.min(1, below))).toFixed(1);
      top[k].push(xa + "," + yt, xb + "," + yt);
      bottom[k].push(xa + "," + yb, xb + "," + yb);
      below = above;
    }
  }
  return top.map((pts, k) => (pts.length ? "M" + pts.join("L") + "L" + bottom[k].reverse().join("L") + "Z" : ""));
}

function miniSummary(job, i) {
  const first = job.frames[1] && job.frames[1].weights[i];
  const last = job.frames[job.lastStep] && job.frames[job.lastStep].weights[i];
  if (!first || !last) return imageName(job, i) + ": no step yet";
  const a = topExpert(first);
  const b = topExpert(last);
  return imageName(job, i) + ": step 1 expert " + a + " " + pct(first[a]) + ", step " + job.lastStep + " expert " + b + " " + pct(last[b]);
}

export function drawMinis(job, select) {
  view.miniAt = Date.now();
  const box = $("weights-minis");
  const K = numExperts(job);
  if (box.children.length !== job.n) {
    box.replaceChildren();
    for (let i = 0; i < job.n; i++) {
      const b = el("button", "wmini");
      b.type = "button";
      b.dataset.image = String(i);
      const s = svg("svg", { viewBox: "0 0 " + MINI.w + " " + MINI.h, class: "wmini-chart", "aria-hidden": "true", preserveAspectRatio: "none" });
      b.append(s, el("span", "wmini-cap"), el("span", "wmini-cap wmini-label"));
      b.addEventListener("click", () => select(i));
      box.append(b);
    }
  }
  for (let i = 0; i < job.n; i++) {
    const b = box.children[i];
    b.setAttribute("aria-pressed", i === view.image ? "true" : "false");
    const summary = miniSummary(job, i);
    b.title = summary;
    b.setAttribute("aria-label", "follow " + summary);
    const caps = b.querySelectorAll(".wmini-cap");
    caps[0].textContent = "image " + (i + 1);
    caps[1].textContent = job.labels && job.labels.length ? labelName(job, i) : "";
    const s = b.querySelector("svg");
    s.replaceChildren();
    miniPaths(job, i, K).forEach((d, k) => d && s.append(svg("path", { d: d, fill: expertColor(k) })));
  }
}
