// ddm web UI, the router's weights per image: the big chart (a stacked area over t, one colour per
// expert, and a ribbon of the experts that served the chosen image) and the note under a strategy that
// gives each image one expert.

import { $, expertColor } from "./dom.js";
import { state } from "./state.js";
import { expertLabel } from "./facts.js";
import { PLOT, RIBBON, VH, VW, numExperts, pct, readoutStep, servedBy, svg, tAfter, tRead, view } from "./weights-common.js";

const xOf = (t) => PLOT.x0 + t * (PLOT.x1 - PLOT.x0);
const yOf = (w) => PLOT.y1 - w * (PLOT.y1 - PLOT.y0);

function steps(job) {
  const out = [];
  for (let s = 1; s <= job.lastStep; s++) if (job.frames[s] && job.frames[s].weights[view.image]) out.push(s);
  return out;
}

// one closed stair path per expert, stacked in expert order (expert 0 at the bottom)
function areaPaths(job, list, K, i) {
  const top = [];
  const bottom = [];
  for (let k = 0; k < K; k++) {
    top.push([]);
    bottom.push([]);
  }
  for (const s of list) {
    const w = job.frames[s].weights[i];
    const xa = xOf(tRead(job, s)).toFixed(2);
    const xb = xOf(tAfter(job, s)).toFixed(2);
    let below = 0;
    for (let k = 0; k < K; k++) {
      const above = below + (w[k] || 0);
      const yt = yOf(Math.min(1, above)).toFixed(2);
      const yb = yOf(Math.min(1, below)).toFixed(2);
      top[k].push(xa + "," + yt, xb + "," + yt);
      bottom[k].push(xa + "," + yb, xb + "," + yb);
      below = above;
    }
  }
  return top.map((pts, k) => (pts.length ? "M" + pts.join("L") + "L" + bottom[k].reverse().join("L") + "Z" : ""));
}

export function drawChart(job) {
  const chart = $("weights-chart");
  const K = numExperts(job);
  const list = steps(job);
  chart.setAttribute("viewBox", "0 0 " + VW + " " + VH);
  chart.replaceChildren();
  chart.dataset.points = String(list.length);
  chart.dataset.steps = String(job.steps || 0);
  chart.dataset.image = String(view.image);
  // grid and y labels
  for (const w of [0, 0.5, 1]) {
    chart.append(svg("line", { class: "wgrid", x1: PLOT.x0, x2: PLOT.x1, y1: yOf(w), y2: yOf(w) }));
    const label = svg("text", { class: "wtick", x: PLOT.x0 - 5, y: yOf(w) + 3.5, "text-anchor": "end" });
    label.textContent = Math.round(w * 100) + "%";
    chart.append(label);
  }
  const served = svg("text", { class: "wtick", x: PLOT.x0 - 5, y: RIBBON.y1 - 1, "text-anchor": "end" });
  served.textContent = "served";
  chart.append(served);
  const paths = areaPaths(job, list, K, view.image);
  const last = list.length ? job.frames[list[list.length - 1]].weights[view.image] : null;
  paths.forEach((d, k) => {
    if (!d) return;
    const path = svg("path", { class: "warea", d: d, fill: expertColor(k), "data-expert": k });
    const title = svg("title");
    title.textContent = expertLabel(k) + (last ? " — " + pct(last[k] || 0) + " at step " + list[list.length - 1] : "");
    path.append(title);
    chart.append(path);
  });
  // who served this image, step by step: a band split between the experts that served, one run of
  // steps with the same experts drawn as one band (a long job stays a few elements)
  let run = null;
  const flush = () => {
    if (!run) return;
    const width = Math.max(0.6, run.x1 - run.x0);
    const h = (RIBBON.y1 - RIBBON.y0) / Math.max(1, run.who.length);
    run.who.forEach((k, j) => {
      chart.append(svg("rect", { class: "wserved", x: run.x0.toFixed(2), y: (RIBBON.y0 + j * h).toFixed(2), width: width.toFixed(2), height: h.toFixed(2), fill: expertColor(k) }));
    });
    if (run.missing) {
      chart.append(svg("rect", { class: "wmissing", x: run.x0.toFixed(2), y: RIBBON.y0, width: width.toFixed(2), height: RIBBON.y1 - RIBBON.y0 }));
    }
  };
  for (const s of list) {
    const f = job.frames[s];
    const who = servedBy(f, view.image);
    const key = who.join(",") + (f.missing.length ? "!" : "");
    if (!run || run.key !== key || run.step !== s - 1) {
      flush();
      run = { key: key, who: who, missing: f.missing.length > 0, x0: xOf(tRead(job, s)) };
    }
    run.x1 = xOf(tAfter(job, s));
    run.step = s;
  }
  flush();
  // the step read out beside the chart
  const step = readoutStep(job);
  if (step) {
    const x = (xOf(tRead(job, step)) + xOf(tAfter(job, step))) / 2;
    chart.append(svg("line", { class: "wcursor", x1: x.toFixed(2), x2: x.toFixed(2), y1: PLOT.y0 - 4, y2: RIBBON.y1 }));
  }
  if (!list.length) {
    const wait = svg("text", { class: "wtick", x: (PLOT.x0 + PLOT.x1) / 2, y: (PLOT.y0 + PLOT.y1) / 2, "text-anchor": "middle" });
    wait.textContent = "waiting for the first step…";
    chart.append(wait);
  }
}

// oracle and top1 give each image one expert at each step: a flat block of 100%, which says nothing
// about mixing. Said next to the chart, with the strategies of this deployment that do mix.
function allOneExpert(job) {
  if (!job.lastStep) return false;
  for (let s = 1; s <= job.lastStep; s++) {
    const f = job.frames[s];
    if (!f) continue;
    for (const w of f.weights) if (!w.some((x) => x >= 0.999)) return false;
  }
  return true;
}

export function drawFlatNote(job) {
  const note = $("weights-flat");
  const flat = allOneExpert(job);
  note.hidden = !flat;
  note.dataset.flat = flat ? "1" : "0";
  if (!flat) return (note.textContent = "");
  const dep = state.deployment;
  const offered = dep ? dep.strategies : [];
  const mixing = offered.filter((s) => s === "full" || s.startsWith("topk:"));
  const named = ["full", "topk:2"].filter((s) => offered.includes(s));
  const suggest = named.length ? named : mixing.slice(0, 2);
  note.textContent =
    "Every step gave each image all its weight (100%) on one expert: this strategy picks one expert " +
    "per image and step (oracle and top1 do), so the chart is one flat block." +
    (suggest.length
      ? " Choose " + suggest.join(" or ") + " to see the experts mix."
      : " This deployment offers no strategy that mixes experts.");
}
