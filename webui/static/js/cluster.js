// ddm web UI: the cluster panel: each expert's card (framework, devices, what it was trained on, its
// queue) and every node's workers with their heartbeats' numbers.

import { $, el, expertColor, fmtAgo } from "./dom.js";
import { state } from "./state.js";
import { renderLegend, trainedOnText } from "./facts.js";
import { routerState, updatePill } from "./connection.js";
import { applyDeployment } from "./deployment.js";

const DEVICE_NAMES = { neuron: "AWS Trainium", cuda: "NVIDIA GPU", gpu: "GPU", cpu: "CPU", "cpu-traced": "CPU" };

function deviceName(device) {
  if (!device) return "?";
  return DEVICE_NAMES[device] || device;
}

export function renderCluster(c) {
  if (!c) return;
  if ("deployment" in c) {
    applyDeployment(c.deployment, c.deployment_error);
    state.noRouter = routerState(c);
    updatePill();
  }
  const errors = $("cluster-errors");
  errors.replaceChildren();
  for (const e of c.errors || []) errors.append(el("p", "cluster-error", e));
  renderExperts(c);
  renderLegend();
  renderNodes(c);
  const jobsQ = c.queues && c.queues.jobs;
  $("cluster-updated").textContent =
    (jobsQ ? "jobs waiting for a router: " + jobsQ.messages + " · " : "") + "updated " + new Date(c.time * 1000).toLocaleTimeString();
}

// experts: deployment entries plus any expert id a worker serves
function renderExperts(c) {
  const experts = state.experts;
  const liveDevices = (state.liveDevices = {});
  const byExpert = {};
  for (const w of c.workers || []) {
    if (w.role !== "expert") continue;
    (byExpert[w.expert_id] = byExpert[w.expert_id] || []).push(w);
    if (w.alive) (liveDevices[w.expert_id] = liveDevices[w.expert_id] || new Set()).add(w.device);
    if (!experts[w.expert_id]) experts[w.expert_id] = { id: w.expert_id, framework: w.framework, device: w.device, classes: [] };
  }
  const ids = Object.keys(experts).map(Number).sort((a, b) => a - b);
  const summary = $("experts-summary");
  summary.replaceChildren();
  for (const k of ids) {
    const e = experts[k];
    const live = (byExpert[k] || []).filter((w) => w.alive).length;
    const q = c.queues ? c.queues[String(k)] : undefined;
    const card = el("div", "expert-card" + (live ? "" : " expert-down"));
    card.dataset.expert = String(k);
    card.dataset.live = String(live);
    const head = el("div", "expert-head");
    const sw = el("span", "swatch swatch-lg");
    sw.style.background = expertColor(k);
    head.append(sw, el("b", null, "Expert " + k), el("span", "fw", e.framework || "?"));
    const devices = liveDevices[k] ? Array.from(liveDevices[k]).map(deviceName).join(" + ") : deviceName(e.device);
    head.append(el("span", "device-chip", devices));
    const facts = el("div", "expert-facts");
    if (e.card_text) {
      // the checkpoint's card (webui/cards.py): architecture, framework, objective; all of it on hover
      const arch = el("div", "expert-arch", e.card_text);
      arch.title = e.card_detail || e.card_text;
      card.dataset.card = e.card_text;
      card.append(head, arch);
    }
    facts.append(el("span", null, trainedOnText(e) || "labels ?"));
    facts.append(el("span", live ? "ok" : "bad", live ? live + " live worker" + (live === 1 ? "" : "s") : "no live worker"));
    const qtext = q === undefined ? "queue ?" : q === null ? "queue not declared" : "queue " + q.messages + " waiting · " + q.consumers + " consumer" + (q.consumers === 1 ? "" : "s");
    facts.append(el("span", "muted", qtext));
    if (!e.card_text) card.append(head);
    card.append(facts);
    summary.append(card);
  }
}

// nodes: one card per region/host with its workers
function renderNodes(c) {
  const nodes = $("nodes");
  nodes.replaceChildren();
  const groups = new Map();
  for (const w of c.workers || []) {
    const key = (w.region || "?") + "\u0000" + (w.host || "?");
    if (!groups.has(key)) groups.set(key, { region: w.region || "?", host: w.host || "?", workers: [] });
    groups.get(key).workers.push(w);
  }
  if (!groups.size) nodes.append(el("p", "muted", "No worker has a heartbeat. Start them with `ddm up`."));
  for (const g of groups.values()) {
    const card = el("div", "node");
    const head = el("div", "node-head");
    head.append(el("span", "region", g.region), el("span", "host mono", g.host));
    const devs = new Set(g.workers.filter((w) => w.role === "expert" && w.alive).map((w) => deviceName(w.device)));
    if (devs.size) head.append(el("span", "device-chip", Array.from(devs).join(" + ")));
    card.append(head);
    for (const w of g.workers) card.append(workerRow(w, c));
    nodes.append(card);
  }
}

function workerRow(w, c) {
  const row = el("div", "worker" + (w.alive ? "" : " gone"));
  row.dataset.alive = w.alive ? "1" : "0";
  row.dataset.role = w.role || "?";
  if (w.role === "expert") row.dataset.expert = String(w.expert_id);
  const top = el("div", "worker-top");
  top.append(el("span", "dot " + (w.alive ? "dot-ok" : "dot-bad"), ""));
  if (w.role === "expert") {
    const sw = el("span", "swatch");
    sw.style.background = expertColor(w.expert_id);
    top.append(sw, el("b", null, "expert " + w.expert_id), el("span", null, (w.framework || "?") + " on " + deviceName(w.device)));
  } else {
    top.append(el("b", null, w.role || "worker"));
  }
  top.append(el("span", "wid mono", w.worker_id));
  row.append(top);
  const stats = el("div", "worker-stats");
  if (!w.alive) {
    stats.append(el("span", "bad", "gone — heartbeat expired" + (w.updated_at ? ", last seen " + fmtAgo(w.updated_at) : "")));
  } else if (w.role === "expert") {
    const q = c.queues ? c.queues[String(w.expert_id)] : null;
    stats.append(
      el("span", null, "queue " + (q ? q.messages : "?")),
      el("span", null, (w.batches ?? 0) + " batches"),
      el("span", null, "mean batch " + (w.mean_batch_size ?? 0).toFixed(1) + " rows"),
      el("span", null, (w.mean_compute_ms ?? 0).toFixed(1) + " ms/batch"),
      el("span", null, (w.requests ?? 0) + " requests")
    );
  } else if (w.role === "decoder") {
    stats.append(
      el("span", null, "on " + deviceName(w.device)),
      el("span", null, (w.requests ?? 0) + " jobs decoded"),
      el("span", null, (w.mean_compute_ms ?? 0).toFixed(1) + " ms each")
    );
  } else if (w.role === "router") {
    stats.append(
      el("span", null, (w.jobs_running ?? 0) + " jobs running"),
      el("span", null, (w.jobs_done ?? 0) + " done"),
      el("span", null, (w.steps ?? 0) + " steps"),
      el("span", null, (w.resends ?? 0) + " resends")
    );
  }
  row.append(stats);
  return row;
}
