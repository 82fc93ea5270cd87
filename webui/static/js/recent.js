// ddm web UI: the Recent jobs table (pushed with the overview, refreshed after the watched job changes).

import { $, el, fmtAgo, fmtDuration } from "./dom.js";
import { state } from "./state.js";
import { labelsText, promptText } from "./facts.js";
import { authHeaders, setDownload, setImageSrc } from "./auth.js";
import { socket } from "./connection.js";
import { renderCluster } from "./cluster.js";
import { watch } from "./job.js";

const recentRows = new Map(); // job_id -> {tr, key}

function renderRecent(jobs) {
  if (!jobs) return;
  const body = $("recent-body");
  const seen = new Set();
  jobs.forEach((j, index) => {
    seen.add(j.job_id);
    let entry = recentRows.get(j.job_id);
    const key = j.status + "|" + (j.error || "") + "|" + (j.finished_at || "") + "|" + (j.degraded || "");
    if (!entry || entry.key !== key) {
      const tr = recentRow(j);
      if (entry) entry.tr.replaceWith(tr);
      entry = { tr: tr, key: key };
      recentRows.set(j.job_id, entry);
    }
    const at = body.children[index];
    if (at !== entry.tr) body.insertBefore(entry.tr, at || null);
  });
  for (const [id, entry] of recentRows) {
    if (!seen.has(id)) {
      entry.tr.remove();
      recentRows.delete(id);
    }
  }
  const empty = body.querySelector(".empty");
  if (jobs.length && empty) empty.remove();
}

function recentRow(j) {
  const tr = el("tr");
  tr.dataset.jobId = j.job_id;
  tr.dataset.status = j.status;
  const thumb = el("td", "thumb");
  if (j.status === "done" && j.result_png) {
    const img = el("img");
    img.alt = "result of job " + j.job_id.slice(0, 8);
    // eager: a lazy thumbnail below the fold (under a 60-image job's tiles) stayed empty until scrolled
    // to or reloaded (issue 40 item 7); the table holds a few small PNGs
    img.loading = "eager";
    setImageSrc(img, j.result_png + "?scale=1");
    thumb.append(img);
  }
  const idCell = el("td");
  const link = el("button", "linklike mono", j.job_id.slice(0, 8));
  link.type = "button";
  link.title = "watch job " + j.job_id;
  link.addEventListener("click", () => watch(j.job_id, null));
  idCell.append(link);
  const st = el("td");
  st.append(el("span", "badge badge-" + j.status, j.status));
  if (j.degraded) {
    const d = el("span", "badge badge-degraded", "degraded");
    d.title = j.degraded;
    st.append(" ", d);
  }
  if (j.error) st.append(el("div", "err-text", j.error));
  const took = j.finished_at && j.started_at ? fmtDuration(j.finished_at - j.started_at) : j.status === "running" ? "…" : "";
  tr.append(
    thumb,
    idCell,
    st,
    conditionCell(j),
    el("td", null, j.n ?? ""),
    el("td", null, j.steps ?? ""),
    el("td", "mono", j.strategy ?? ""),
    el("td", "muted", fmtAgo(j.created_at)),
    el("td", null, took)
  );
  const act = el("td");
  if (j.status === "done" && j.result_png) {
    const a = el("a", "btn-small", "PNG");
    setDownload(a, j.result_png + "?download=1", "ddm-" + j.job_id + ".png");
    act.append(a);
  }
  tr.append(act);
  return tr;
}

// what the job's images are of: its labels' names, or a text job's prompt (as text, cut short by the
// CSS: the whole of it in the tooltip)
function conditionCell(j) {
  if (j.prompt === undefined || j.prompt === null) return el("td", null, labelsText(j.labels, j.label_names));
  const td = el("td", "prompt-cell", promptText(j.prompt, j.negative_prompt));
  td.title = td.textContent;
  return td;
}

let recentTimer = null;
function refreshRecentSoon() {
  if (recentTimer) return;
  recentTimer = setTimeout(() => {
    recentTimer = null;
    fetch("/api/jobs", { headers: authHeaders() })
      .then((r) => r.json())
      .then((d) => d.jobs && renderRecent(d.jobs))
      .catch(() => {});
  }, 300);
}

// the watched job moved on: the table shows it soon
socket.on("job", (info) => {
  if (state.job && info.job_id === state.job.id) refreshRecentSoon();
});

socket.on("overview", (o) => {
  renderCluster(o.cluster);
  if (o.jobs) renderRecent(o.jobs);
});
