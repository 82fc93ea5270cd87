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
// app.js owns the job; this file reads it through window.ddmPage and follows the "ddm:*" events it
// announces. Everything is put into the page with textContent or setAttribute, never as markup.
"use strict";

(function () {
  const page = window.ddmPage;
  if (!page) return;
  const $ = (id) => document.getElementById(id);
  const SVG = "http://www.w3.org/2000/svg";
  // the main chart's drawing box (viewBox units)
  const VW = 600;
  const PLOT = { x0: 50, x1: 594, y0: 8, y1: 150 };
  const RIBBON = { y0: 157, y1: 169 };
  const VH = 173;
  const MINI = { w: 120, h: 34, cols: 60 }; // a small multiple: at most 60 columns, steps averaged
  const MINI_EVERY_MS = 250; // small multiples redraw at most this often while frames arrive

  const state = {
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

  function svg(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    return node;
  }

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  const pct = (w) => (100 * w).toFixed(1) + "%";

  // ------------------------------------------------------------------ reading the job

  function current() {
    const job = page.job();
    return job && job.id === state.jobId ? job : null;
  }

  function numExperts(job) {
    for (const f of job.frames) if (f && f.weights && f.weights.length) return f.weights[0].length;
    return Object.keys(page.experts()).length;
  }

  // the t the router read at `step` (1-based): the t of the step before (0 at step 1)
  function tRead(job, step) {
    if (step <= 1) return 0;
    const before = job.frames[step - 1];
    return before ? before.t : (step - 1) / Math.max(1, job.steps);
  }

  function tAfter(job, step) {
    const f = job.frames[step];
    return f ? f.t : step / Math.max(1, job.steps);
  }

  // the experts that computed image i's velocity at a step (the server says, from the unrounded
  // weights; else: weight > 0 and listed by the frame)
  function servedBy(f, i) {
    if (f.served && f.served[i]) return f.served[i];
    const w = f.weights[i] || [];
    return f.experts.filter((k) => (w[k] || 0) > 0);
  }

  function imageName(job, i) {
    const label = job.labels && job.labels.length ? page.className(job.labels[i]) : null;
    return "image " + (i + 1) + (label !== null ? " · " + label : "");
  }

  function topExpert(w) {
    let best = 0;
    for (let k = 1; k < w.length; k++) if (w[k] > w[best]) best = k;
    return best;
  }

  // ------------------------------------------------------------------ the big chart

  const xOf = (t) => PLOT.x0 + t * (PLOT.x1 - PLOT.x0);
  const yOf = (w) => PLOT.y1 - w * (PLOT.y1 - PLOT.y0);

  function steps(job) {
    const out = [];
    for (let s = 1; s <= job.lastStep; s++) if (job.frames[s] && job.frames[s].weights[state.image]) out.push(s);
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

  function drawChart(job) {
    const chart = $("weights-chart");
    const K = numExperts(job);
    const list = steps(job);
    chart.setAttribute("viewBox", "0 0 " + VW + " " + VH);
    chart.replaceChildren();
    chart.dataset.points = String(list.length);
    chart.dataset.steps = String(job.steps || 0);
    chart.dataset.image = String(state.image);
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
    const paths = areaPaths(job, list, K, state.image);
    const last = list.length ? job.frames[list[list.length - 1]].weights[state.image] : null;
    paths.forEach((d, k) => {
      if (!d) return;
      const path = svg("path", { class: "warea", d: d, fill: page.expertColor(k), "data-expert": k });
      const title = svg("title");
      title.textContent = page.expertLabel(k) + (last ? " — " + pct(last[k] || 0) + " at step " + list[list.length - 1] : "");
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
        chart.append(svg("rect", { class: "wserved", x: run.x0.toFixed(2), y: (RIBBON.y0 + j * h).toFixed(2), width: width.toFixed(2), height: h.toFixed(2), fill: page.expertColor(k) }));
      });
      if (run.missing) {
        chart.append(svg("rect", { class: "wmissing", x: run.x0.toFixed(2), y: RIBBON.y0, width: width.toFixed(2), height: RIBBON.y1 - RIBBON.y0 }));
      }
    };
    for (const s of list) {
      const f = job.frames[s];
      const who = servedBy(f, state.image);
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

  function drawFlatNote(job) {
    const note = $("weights-flat");
    const flat = allOneExpert(job);
    note.hidden = !flat;
    note.dataset.flat = flat ? "1" : "0";
    if (!flat) return (note.textContent = "");
    const dep = page.deployment();
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

  function readoutStep(job) {
    const want = state.cursor !== null ? state.cursor : state.shown || job.lastStep;
    const step = Math.max(0, Math.min(want, job.lastStep));
    return job.frames[step] ? step : 0;
  }

  // ------------------------------------------------------------------ the readout: one bar per expert

  function drawReadout(job) {
    const box = $("weights-now");
    box.replaceChildren();
    const step = readoutStep(job);
    if (!step) return;
    const f = job.frames[step];
    const w = f.weights[state.image] || [];
    const who = servedBy(f, state.image);
    box.dataset.step = String(step);
    const head = el("div", "wnow-head");
    head.append(
      el("span", "wnow-title", "step " + step + " of " + job.steps + " · the router read t = " + tRead(job, step).toFixed(3)),
      el("span", "hint", imageName(job, state.image) + " · served: " + (who.map((k) => "expert " + k).join(", ") || "none"))
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
      sw.style.background = page.expertColor(k);
      name.append(sw, el("span", null, page.expertLabel(k)));
      const track = el("div", "wnow-track");
      track.setAttribute("role", "meter");
      track.setAttribute("aria-valuemin", "0");
      track.setAttribute("aria-valuemax", "100");
      track.setAttribute("aria-valuenow", (100 * weight).toFixed(1));
      track.setAttribute("aria-label", "weight of expert " + k);
      const fill = el("div", "wnow-fill");
      fill.style.width = (100 * weight).toFixed(1) + "%";
      fill.style.background = page.expertColor(k);
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
    const w = f.weights[state.image] || [];
    const who = servedBy(f, state.image);
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

  function drawTable(job) {
    const body = $("weights-rows");
    const K = numExperts(job);
    const head = $("weights-head");
    if (state.table.image !== state.image || state.table.jobId !== job.id || head.children.length !== K + 3) {
      body.replaceChildren();
      head.replaceChildren(el("th", null, "step"), el("th", null, "t read"));
      for (let k = 0; k < K; k++) head.append(el("th", null, "expert " + k));
      head.append(el("th", null, "served"));
      state.table = { image: state.image, jobId: job.id, rows: 0 };
    }
    for (let s = state.table.rows + 1; s <= job.lastStep; s++) {
      if (!job.frames[s] || !job.frames[s].weights[state.image]) break;
      body.append(tableRow(job, s));
      state.table.rows = s;
    }
  }

  // ------------------------------------------------------------------ small multiples

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

  function drawMinis(job) {
    state.miniAt = Date.now();
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
      b.setAttribute("aria-pressed", i === state.image ? "true" : "false");
      const summary = miniSummary(job, i);
      b.title = summary;
      b.setAttribute("aria-label", "follow " + summary);
      const caps = b.querySelectorAll(".wmini-cap");
      caps[0].textContent = "image " + (i + 1);
      caps[1].textContent = job.labels && job.labels.length ? page.className(job.labels[i]) : "";
      const s = b.querySelector("svg");
      s.replaceChildren();
      miniPaths(job, i, K).forEach((d, k) => d && s.append(svg("path", { d: d, fill: page.expertColor(k) })));
    }
  }

  // ------------------------------------------------------------------ drawing, throttled

  function draw(forceMinis) {
    const job = current();
    const wrap = $("weights");
    if (!job || !job.n) {
      wrap.hidden = true;
      return;
    }
    wrap.hidden = false;
    if (state.image >= job.n) state.image = 0;
    $("weights-image").textContent = imageName(job, state.image);
    drawChart(job);
    drawFlatNote(job);
    drawReadout(job);
    drawTable(job);
    markTile();
    if (forceMinis || Date.now() - state.miniAt >= MINI_EVERY_MS) {
      drawMinis(job);
    } else if (state.miniTimer === null) {
      state.miniTimer = setTimeout(() => {
        state.miniTimer = null;
        const j = current();
        if (j && j.n) drawMinis(j);
      }, MINI_EVERY_MS);
    }
  }

  function schedule(forceMinis) {
    if (forceMinis) state.forceMinis = true;
    if (state.drawPending) return;
    state.drawPending = true;
    requestAnimationFrame(() => {
      state.drawPending = false;
      const force = state.forceMinis;
      state.forceMinis = false;
      draw(force);
    });
  }

  function select(i) {
    state.image = i;
    schedule(true);
  }

  function markTile() {
    const tiles = $("tiles").children;
    for (let i = 0; i < tiles.length; i++) {
      tiles[i].classList.toggle("tile-selected", i === state.image);
      tiles[i].dataset.image = String(i);
    }
  }

  // ------------------------------------------------------------------ events

  function follow(detail) {
    if (!detail || detail.id !== state.jobId) {
      state.jobId = detail ? detail.id : null;
      state.image = 0;
      state.cursor = null;
      state.shown = 0;
      state.table = { jobId: null, image: -1, rows: 0 };
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
    state.shown = ev.detail.step;
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
    if (s !== null && s !== state.cursor) {
      state.cursor = s;
      schedule(false);
    }
  });
  chart.addEventListener("mouseleave", () => {
    state.cursor = null;
    schedule(false);
  });
  chart.addEventListener("blur", () => {
    state.cursor = null;
    schedule(false);
  });
  chart.addEventListener("keydown", (ev) => {
    const job = current();
    if (!job || !job.lastStep) return;
    const at = state.cursor !== null ? state.cursor : readoutStep(job) || 1;
    const moves = { ArrowLeft: at - 1, ArrowRight: at + 1, Home: 1, End: job.lastStep };
    if (!(ev.key in moves)) return;
    ev.preventDefault();
    state.cursor = Math.max(1, Math.min(job.lastStep, moves[ev.key]));
    schedule(false);
  });
})();
