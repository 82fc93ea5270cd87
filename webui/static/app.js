// ddm web UI: plain JavaScript, no build step. Everything that came from a user or a server is put
// into the page with textContent (never innerHTML), so no text can become markup.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const COLORS = ["#4f9cf9", "#f5a524", "#2fbf8a", "#e5484d", "#a66cf0", "#22b8cf", "#d6b400", "#e05ca8"];
  const expertColor = (k) => COLORS[((k % COLORS.length) + COLORS.length) % COLORS.length];
  // what each strategy does comes with the deployment (/api/config: strategy_hints); the page never
  // parses a strategy itself
  function strategyHint(s) {
    if (!s) return "the serving deployment's default strategy";
    return (deployment && deployment.strategy_hints && deployment.strategy_hints[s]) || "";
  }
  // the solvers and grids likewise (/api/config: solver_hints, grid_hints, and solver_stages: the
  // evaluations each step of a solver costs, schema/solver.py's numbers)
  function samplingHint(kind, name) {
    if (!name) return "the serving deployment's default " + (kind === "solver" ? "solver" : "time grid");
    const hints = deployment && deployment[kind + "_hints"];
    return (hints && hints[name]) || "";
  }
  function solverStages(name) {
    const stages = deployment && deployment.solver_stages;
    return stages && stages[name] ? stages[name] : null;
  }
  // what a deployment serves; a descriptor without "sampling" (a router from before solvers): Euler on
  // the uniform grid only
  function samplingOf(dep) {
    const s = dep && dep.sampling;
    if (s && s.solvers && s.solvers.length && s.grids && s.grids.length) return s;
    return { solvers: ["euler"], grids: ["uniform"], default_solver: "euler", default_grid: "uniform" };
  }
  // "8 steps × 2 = 16 evaluations" (one evaluation per step: "50 steps · 50 evaluations")
  function evaluationsText(steps, stages) {
    if (typeof steps !== "number" || !stages) return (steps ?? "?") + " steps";
    const nfe = steps * stages;
    const evals = nfe + " evaluation" + (nfe === 1 ? "" : "s");
    return steps + " step" + (steps === 1 ? "" : "s") + (stages > 1 ? " × " + stages + " = " : " · ") + evals;
  }
  const KIND_TITLES = {
    bad_input: "Bad input",
    no_deployment: "No router serving",
    no_worker: "No live worker",
    rate_limited: "Too many jobs",
    too_many_watches: "Too many watches",
    unauthorized: "Token needed",
    unavailable: "Service unavailable",
    not_found: "Unknown job",
    failed: "Job failed",
  };
  // One sample's [C, H, W] until the deployment (its sample_space) or a frame says otherwise: the legacy
  // 1x32x32. Tiles are drawn as whole-pixel upscales up to MAX_TILE_PX (8x at 32 px, 4x at 64 px).
  const LEGACY_SHAPE = [1, 32, 32];
  const MAX_TILE_PX = 256;

  // Other scripts of the page (weights.js: the router's weights per image) read the watched job and the
  // deployment through this, and follow it by the "ddm:*" events announced on document.
  function announce(name, detail) {
    document.dispatchEvent(new CustomEvent(name, { detail: detail }));
  }
  window.ddmPage = {
    job: () => job,
    sampleShape: () => sampleShape(),
    expertColor: (k) => expertColor(k),
    expertLabel: (k) => expertLabel(k),
    className: (y) => className(y),
    experts: () => experts,
    deployment: () => deployment,
  };

  // ------------------------------------------------------------------ small helpers

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function b64ToBytes(b64) {
    const bin = atob(b64);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  function fmtAgo(unixSeconds) {
    if (!unixSeconds) return "";
    const s = Math.max(0, Date.now() / 1000 - unixSeconds);
    if (s < 60) return Math.round(s) + " s ago";
    if (s < 3600) return Math.round(s / 60) + " min ago";
    if (s < 86400) return Math.round(s / 3600) + " h ago";
    return new Date(unixSeconds * 1000).toLocaleString();
  }

  function fmtDuration(seconds) {
    if (seconds === null || seconds === undefined || !isFinite(seconds)) return "";
    if (seconds < 60) return seconds.toFixed(1) + " s";
    return Math.floor(seconds / 60) + " min " + Math.round(seconds % 60) + " s";
  }

  let classNames = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"]; // the deployment's, once known
  let nullLabel = 10; // the null label: an unconditional image (the deployment says so too)
  let nullName = "unconditional";

  function className(y) {
    if (y === nullLabel) return nullName;
    return classNames[y] !== undefined ? classNames[y] : String(y);
  }

  function labelsText(labels) {
    const uniq = Array.from(new Set(labels || [])).sort((a, b) => a - b);
    const classes = uniq.filter((y) => y !== nullLabel);
    const digits = classNames.every((c, i) => c === String(i));
    const parts = classes.length === classNames.length ? ["all " + classes.length] : classes.map(className);
    if (classes.length < uniq.length) parts.push(nullName);
    return parts.join(digits && classes.length < classNames.length ? " " : ", ");
  }

  function showAlert(box, kind, text) {
    box.hidden = false;
    box.querySelector(".alert-title").textContent = (KIND_TITLES[kind] || "Error") + ": ";
    box.querySelector(".alert-text").textContent = text;
  }

  function hideAlert(box) {
    box.hidden = true;
  }

  // ------------------------------------------------------------------ deployment facts

  let experts = {}; // id -> {id, framework, device, classes, trained_on}
  let liveDevices = {}; // expert id -> Set of devices of its live workers

  function expertLabel(k) {
    const e = experts[k];
    const devices = liveDevices[k] && liveDevices[k].size ? Array.from(liveDevices[k]).join("+") : e && e.device;
    const parts = ["expert " + k];
    if (e) parts.push(e.framework);
    if (devices) parts.push(devices);
    return parts.join(" · ");
  }

  // the server's words (webui/jobs.py trained_on): '0-4', or a k-means cluster's largest label shares
  function trainedOnText(e) {
    return e && e.trained_on ? "trained on " + e.trained_on : "";
  }

  function renderLegend() {
    const legend = $("legend");
    legend.replaceChildren();
    const ids = Object.keys(experts).map(Number).sort((a, b) => a - b);
    for (const k of ids) {
      const item = el("span", "legend-item");
      const sw = el("span", "swatch");
      sw.style.background = expertColor(k);
      item.append(sw, el("span", null, expertLabel(k)));
      const cls = trainedOnText(experts[k]);
      if (cls) item.append(el("span", "muted", " · " + cls));
      legend.append(item);
    }
  }

  // The serving router's descriptor (strategies, defaults, class names, experts): on load from
  // /api/config, then with every cluster push, so a router that starts (or changes) later shows up.
  let deploymentKey = null;
  let deployment = null; // the last descriptor applied (its strategy_hints word the strategy menu)

  function applyDeployment(dep, error) {
    const banner = $("dep-error");
    if (!dep) {
      showAlert(banner, "no_deployment", error || "no router has published its deployment");
      $("dep-name").textContent = "no router serving";
      return;
    }
    hideAlert(banner);
    const key = JSON.stringify([
      dep.name, dep.strategies, dep.default_strategy, dep.default_guidance, dep.class_names, dep.experts, dep.sampling,
      dep.sample_space,
    ]);
    if (key === deploymentKey) return;
    deploymentKey = key;
    deployment = dep;
    $("dep-name").textContent = dep.name;
    // what one sample is (the server's words: SampleSpace.describe), above the experts' cards
    $("sample-space").hidden = !dep.sample_text;
    $("sample-space").textContent = dep.latent_text
      ? "samples " + dep.latent_text + "; each step shows a linear preview of the latent"
      : dep.sample_text
        ? "samples " + dep.sample_text
        : "";
    classNames = dep.class_names.slice();
    if (dep.null_label !== undefined) nullLabel = dep.null_label;
    if (dep.null_name) nullName = dep.null_name;
    classBoxes.forEach((b) => (b.parentNode.querySelector("span").textContent = className(Number(b.value))));
    $("classes").classList.toggle("classes-named", classNames.some((c, i) => c !== String(i)));
    $("all-classes").textContent = "All " + classNames.length;
    const select = $("strategy");
    const chosen = select.value;
    select.replaceChildren();
    for (const s of dep.strategies) {
      const opt = el("option", null, s + (s === dep.default_strategy ? " (default)" : ""));
      opt.value = s;
      opt.selected = strategyChosen && dep.strategies.includes(chosen) ? s === chosen : s === dep.default_strategy;
      select.append(opt);
    }
    if (!strategyChosen || !dep.strategies.includes(chosen)) strategyChosen = false;
    const sampling = samplingOf(dep);
    fillMenu("solver", sampling.solvers, sampling.default_solver);
    fillMenu("grid", sampling.grids, sampling.default_grid);
    const guidance = $("guidance");
    if (guidance.value === "" || guidance.dataset.touched !== "1") guidance.value = String(dep.default_guidance);
    experts = {};
    for (const e of dep.experts || []) experts[e.id] = e;
    // a job watched before the deployment was known (a #job= link) has tiles of the legacy size: until
    // its first frame says what it is, size them by this deployment's samples
    if (job && !job.lastStep && job.shape.join("x") !== sampleShape().join("x")) {
      job.shape = sampleShape();
      if (job.n) buildTiles();
    }
    renderLegend();
    updateSummary();
    announce("ddm:deployment", { dep: dep });
  }

  // DDM_UI_TOKEN: the field exists only when the server asks for a token; kept in this browser. With a
  // token every read needs it: fetches send it as a Bearer header, the socket on connect (auth), and
  // images come through fetch as blob URLs (an <img> or a link cannot send a header).
  const TOKEN_KEY = "ddm-ui-token";
  const tokenField = $("token");
  if (tokenField) tokenField.value = localStorage.getItem(TOKEN_KEY) || "";

  function currentToken() {
    return tokenField ? tokenField.value.trim() : "";
  }

  function authHeaders() {
    const token = currentToken();
    return token ? { Authorization: "Bearer " + token } : {};
  }

  const blobUrls = new Map(); // result URL -> Promise of its blob: URL (a result never changes)
  function authedUrl(url) {
    if (!tokenField) return Promise.resolve(url);
    if (!blobUrls.has(url)) {
      const p = fetch(url, { headers: authHeaders() }).then((r) => {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.blob().then((b) => URL.createObjectURL(b));
      });
      p.catch(() => blobUrls.delete(url)); // try again next time (a token typed since)
      blobUrls.set(url, p);
    }
    return blobUrls.get(url);
  }

  function setImageSrc(img, url) {
    authedUrl(url).then((u) => (img.src = u)).catch(() => {});
  }

  function setDownload(a, url, filename) {
    a.setAttribute("download", filename);
    a.href = tokenField ? "#" : url;
    if (tokenField) a.onclick = (ev) => {
      if (a.href.startsWith("blob:")) return; // fetched already: the browser downloads it
      ev.preventDefault();
      authedUrl(url).then((u) => {
        a.href = u;
        a.click();
      }).catch(() => {});
    };
  }

  fetch("/api/config")
    .then((r) => r.json())
    .then((cfg) => {
      applyDeployment(cfg.deployment, cfg.deployment_error);
      if (!cfg.deployment) {
        noRouter = cfg.deployment_error || "no router has published its deployment";
        updatePill();
      }
    })
    .catch(() => {});

  // ------------------------------------------------------------------ the form

  const form = $("job-form");
  const classBoxes = Array.from(document.querySelectorAll("#classes input[type=checkbox]"));

  const unconditionalBox = $("unconditional"); // the null label: images with no label

  // The strategy menu shows the deployment's default until the user picks one. A job with
  // unconditional images gets what the server gives a job that names no strategy (the CLI's rule:
  // top1 where the default is the oracle, /api/config unconditional_strategy), so the page never
  // preselects a strategy the server would refuse; the form then sends no strategy at all.
  let strategyChosen = false;
  for (const type of ["input", "change"]) $("strategy").addEventListener(type, () => (strategyChosen = true));

  // The solver and grid menus likewise show the deployment's defaults, marked "(default)", and the form
  // sends a solver or grid only once the user picked one (null: the router resolves the default).
  const menuChosen = { solver: false, grid: false };
  for (const id of Object.keys(menuChosen)) {
    for (const type of ["input", "change"]) $(id).addEventListener(type, () => (menuChosen[id] = true));
  }

  function fillMenu(id, names, def) {
    const select = $(id);
    const chosen = select.value;
    const keep = menuChosen[id] && names.includes(chosen);
    select.replaceChildren();
    for (const name of names) {
      const opt = el("option", null, name + (name === def ? " (default)" : ""));
      opt.value = name;
      opt.selected = keep ? name === chosen : name === def;
      select.append(opt);
    }
    if (!keep) menuChosen[id] = false;
  }

  function autoStrategy(labels) {
    if (!deployment) return null;
    const auto =
      labels.includes(nullLabel) && deployment.unconditional_strategy
        ? deployment.unconditional_strategy
        : deployment.default_strategy;
    return deployment.strategies.includes(auto) ? auto : deployment.default_strategy;
  }

  function followDefault(labels) {
    if (strategyChosen || !deployment) return;
    const auto = autoStrategy(labels);
    if (auto && $("strategy").value !== auto) $("strategy").value = auto;
  }

  function chosenClasses() {
    return classBoxes.filter((b) => b.checked).map((b) => Number(b.value));
  }

  function chosenLabels() {
    const chosen = chosenClasses();
    return unconditionalBox && unconditionalBox.checked ? chosen.concat([nullLabel]) : chosen;
  }


  function numberOrNull(id) {
    const raw = $(id).value.trim();
    if (raw === "") return null;
    const v = Number(raw);
    return Number.isFinite(v) ? v : raw; // the server says what is wrong with a non-number
  }

  function updateSummary() {
    const chosen = chosenLabels();
    const n = numberOrNull("n_per_label");
    const images = typeof n === "number" ? chosen.length * n : NaN;
    const steps = numberOrNull("steps");
    const solver = $("solver").value;
    const text = chosen.length
      ? (isFinite(images) ? images : "?") + " image" + (images === 1 ? "" : "s") + " · " +
        evaluationsText(steps, solverStages(solver))
      : "no label chosen";
    $("form-summary").textContent = text;
    $("solver-hint").textContent = samplingHint("solver", solver);
    $("grid-hint").textContent = samplingHint("grid", $("grid").value);
    followDefault(chosen);
    const strategy = $("strategy").value;
    const refused = strategy === "oracle" && chosen.includes(nullLabel);
    const instead =
      !strategyChosen && deployment && chosen.includes(nullLabel) && strategy !== deployment.default_strategy;
    $("strategy-hint").textContent = refused
      ? "oracle routes by the label, and " + nullName + " images have none: choose top1, topk:K or full, " +
        "whose router reads x_t"
      : instead
        ? strategyHint(strategy) + " (" + nullName + " images get " + strategy + ", not the default " +
          deployment.default_strategy + ", which routes by the label)"
        : strategyHint(strategy);
    $("strategy-hint").classList.toggle("bad", refused);
  }

  $("all-classes").addEventListener("click", () => {
    classBoxes.forEach((b) => (b.checked = true));
    updateSummary();
  });
  $("clear-classes").addEventListener("click", () => {
    classBoxes.forEach((b) => (b.checked = false));
    if (unconditionalBox) unconditionalBox.checked = false;
    updateSummary();
  });
  $("seed-random").addEventListener("click", () => {
    $("seed").value = String(Math.floor(Math.random() * 4294967296));
    updateSummary();
  });
  $("guidance").addEventListener("input", () => ($("guidance").dataset.touched = "1"));
  form.addEventListener("input", updateSummary);
  form.addEventListener("change", updateSummary);
  updateSummary();

  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    hideAlert($("form-error"));
    const chosen = chosenLabels();
    const data = {
      labels: chosen.length === classBoxes.length && !chosen.includes(nullLabel) ? "all" : chosen,
      n_per_label: numberOrNull("n_per_label"),
      steps: numberOrNull("steps"),
      // left at the default: unset, and the server resolves it as the CLI does (top1 for unconditional
      // images where the default is the oracle)
      strategy: strategyChosen ? $("strategy").value || null : null,
      guidance: numberOrNull("guidance"),
      seed: numberOrNull("seed"),
      // likewise: sent only when picked, else the deployment's default
      solver: menuChosen.solver ? $("solver").value || null : null,
      grid: menuChosen.grid ? $("grid").value || null : null,
    };
    if (tokenField) {
      data.token = tokenField.value.trim();
      localStorage.setItem(TOKEN_KEY, data.token);
    }
    if (!socket.connected) {
      showAlert($("form-error"), "unavailable", "not connected to the UI server; retrying the connection…");
      return;
    }
    const button = $("submit");
    button.disabled = true;
    button.textContent = "Submitting…";
    socket.timeout(20000).emit("submit", data, (err, res) => {
      button.disabled = false;
      button.textContent = "Generate";
      if (err) {
        showAlert($("form-error"), "unavailable", "the server did not answer within 20 s");
        return;
      }
      if (!res.ok) {
        showAlert($("form-error"), res.kind, res.error);
        if (res.kind === "unauthorized" && tokenField) tokenField.focus();
        return;
      }
      watch(res.job_id, res.spec);
    });
  });

  // ------------------------------------------------------------------ the job on stage

  let job = null; // the watched job
  let drawPending = false;
  let playing = null; // interval id while replaying

  function newJob(id, spec) {
    return {
      id: id,
      steps: spec ? spec.steps : 0,
      labels: spec ? spec.labels : [],
      n: spec ? spec.labels.length : 0,
      cols: 1,
      status: "queued",
      lastStep: 0,
      framesSeen: 0,
      frames: [], // step -> {step, t, experts, weights, latency_ms, pixels|null}
      shown: 0, // step drawn on the tiles
      follow: true, // the tiles follow the newest step (false while the user scrubs)
      canvases: [],
      bars: [],
      shape: sampleShape(), // [C, H, W] of one latent: the deployment's, then the frames'
    };
  }

  // the shape [C, H, W] the serving deployment's images are drawn at (a latent deployment's: its decoder's
  // pixels, which its previews are drawn at too), else its sample shape, else the legacy one
  function sampleShape() {
    const image = deployment && deployment.image_shape;
    if (image && image.length === 3) return image.slice();
    const space = deployment && deployment.sample_space;
    return space && space.shape && space.shape.length === 3 ? space.shape.slice() : LEGACY_SHAPE.slice();
  }

  // A latent deployment's job is done: its decoded images replace the previews on the tiles (the last
  // step shows them; scrubbing back shows each step's preview).
  function showDecoded(j) {
    fetch("/api/jobs/" + encodeURIComponent(j.id) + "/result.pixels", { headers: authHeaders() })
      .then((r) => (r.ok ? r.json() : null))
      .then((d) => {
        if (!d || job !== j || !j.lastStep) return;
        const last = j.frames[j.lastStep];
        j.decoded = { ...last, pixels: b64ToBytes(d.pixels), channels: d.channels, decoded: true };
        $("stage").dataset.decoded = "1";
        if (j.follow) drawFrame(j.lastStep);
        announce("ddm:decoded", { id: j.id });
      })
      .catch(() => {});
  }

  function watch(jobId, spec) {
    stopPlaying();
    job = newJob(jobId, spec);
    announce("ddm:job", { id: jobId });
    history.replaceState(null, "", "#job=" + encodeURIComponent(jobId));
    hideAlert($("job-error"));
    $("stage").dataset.jobId = jobId;
    delete $("stage").dataset.nfe;
    delete $("stage").dataset.decoded;
    $("tiles").replaceChildren();
    $("download").hidden = true;
    $("scrub-row").hidden = true;
    setStatus("queued");
    showQueue(null);
    if (spec) setupJob({ job_id: jobId, steps: spec.steps, labels: spec.labels, n: spec.labels.length });
    sendWatch();
  }

  function sendWatch() {
    // (again after a reconnect or a reload: the server replays the steps; those already here are skipped)
    const id = job.id;
    const request = { job_id: id };
    if (tokenField) request.token = currentToken(); // DDM_UI_TOKEN: watching needs it too
    socket.timeout(20000).emit("watch", request, (err, res) => {
      if (!job || job.id !== id) return;
      if (err) return showAlert($("job-error"), "unavailable", "the server did not answer within 20 s");
      if (!res.ok) {
        // refused before anything was sent (token, limits): the job itself is fine
        if (res.kind === "not_found") setStatus("expired");
        else if (res.kind !== "unauthorized" && res.kind !== "too_many_watches") setStatus("failed");
        showAlert($("job-error"), res.kind, res.error);
        if (res.kind === "unauthorized" && tokenField) tokenField.focus();
      }
    });
  }

  // Cancel: the router stops the job at its next step; the next "job" event says cancelled.
  $("cancel-job").addEventListener("click", () => {
    if (!job) return;
    fetch("/api/jobs/" + encodeURIComponent(job.id) + "/cancel", { method: "POST", headers: authHeaders() })
      .then((r) => r.json())
      .then((res) => {
        if (res.ok === false) showAlert($("job-error"), res.kind, res.error);
      })
      .catch(() => showAlert($("job-error"), "unavailable", "the server did not answer"));
  });

  function setStatus(status, degraded) {
    $("cancel-job").hidden = !(status === "queued" || status === "running");
    const badge = $("job-status");
    badge.hidden = false;
    badge.textContent = degraded ? status + " · degraded" : status;
    badge.className = "badge badge-" + status + (degraded ? " badge-degraded" : "");
    badge.title = degraded ? "degraded: " + degraded : "";
  }

  // A queued job's place and the estimate of when it starts (from the throughput measured over recent
  // jobs: an estimate, and said so); the server words it as `ddm status` does.
  function showQueue(place) {
    const p = $("job-queue");
    p.hidden = !place;
    p.textContent = place ? "In the queue: " + place.text + "." : "";
    p.dataset.position = place ? String(place.position) : "";
  }

  function setupJob(info) {
    if (info.steps && job.steps !== info.steps) job.steps = info.steps;
    if (info.labels && info.labels.length) {
      job.labels = info.labels;
      job.n = info.labels.length;
    }
    if (!job.n && info.n) job.n = info.n;
    const distinct = new Set(job.labels).size || 1;
    job.cols = Math.max(1, Math.min(job.n || 1, distinct)); // 11 at most: the classes and unconditional
    if (job.canvases.length !== job.n && job.n) buildTiles();
    buildStrip();
    const title = "Job " + job.id.slice(0, 8);
    $("job-title").textContent = title;
    const bits = [];
    if (job.n) bits.push(job.n + " image" + (job.n === 1 ? "" : "s") + " of " + labelsText(job.labels));
    if (info.strategy) bits.push(info.strategy);
    // the solver, grid and evaluations the router resolved (before it starts: what the job asked for)
    if (info.solver || info.grid) {
      bits.push((info.solver || "the default solver") + " on the " + (info.grid || "default") + " grid");
    }
    if (job.steps && info.nfe) bits.push(evaluationsText(job.steps, info.nfe / job.steps));
    else if (job.steps) bits.push(job.steps + " steps");
    if (info.nfe) $("stage").dataset.nfe = String(info.nfe);
    if (info.guidance !== undefined && info.guidance !== null) bits.push("guidance " + info.guidance);
    if (info.seed !== undefined && info.seed !== null) bits.push("seed " + info.seed);
    $("job-sub").textContent = bits.join(" · ");
    updateProgress();
    announce("ddm:job", { id: job.id });
  }

  function tileLayout() {
    // the largest whole-pixel upscale that fits the stage: its width, and a height that grows with the
    // window (a few tiles in a tall window are large, many are smaller). Images come row by row, one
    // column per label, so several images per label take a multiple of the labels as columns (column c:
    // label c mod labels); one label alone (or unconditional) may take any column count
    const W = $("tiles").clientWidth || 600;
    const H = Math.max(360, Math.min(1000, Math.round(window.innerHeight * 0.75)));
    const ih = job.shape[1];
    const iw = job.shape[2];
    const maxScale = Math.max(1, Math.floor(MAX_TILE_PX / Math.max(ih, iw)));
    const caption = 24;
    const distinct = new Set(job.labels).size;
    const perLabel = distinct > 1 && job.labels.length > distinct;
    const step = perLabel ? job.cols : 1;
    let best = { cols: job.cols, scale: 0, empty: Infinity };
    for (let cols = perLabel ? job.cols : 1; cols <= Math.max(job.cols, job.n); cols += step) {
      const rows = Math.ceil(job.n / cols);
      const gap = tileGap(cols);
      const byW = Math.floor((W - gap * (cols - 1)) / cols / iw);
      const byH = Math.floor((H - rows * (gap + caption)) / rows / ih);
      const scale = Math.max(1, Math.min(maxScale, byW, byH));
      const empty = rows * cols - job.n; // prefer full rows (10 images: 5 x 2, not 6 + 4)
      const better =
        scale > best.scale ||
        (scale === best.scale && (empty < best.empty || (empty === best.empty && cols > best.cols)));
      if (better) best = { cols, scale, empty };
    }
    return best;
  }

  function tileGap(cols) {
    return cols >= 8 ? 6 : 10;
  }

  function buildTiles() {
    const tiles = $("tiles");
    tiles.replaceChildren();
    job.canvases = [];
    job.bars = [];
    const layout = tileLayout();
    const scale = layout.scale;
    const ih = job.shape[1];
    const iw = job.shape[2];
    tiles.style.gridTemplateColumns = "repeat(" + layout.cols + ", " + iw * scale + "px)";
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
      const cap = el("figcaption", "tile-cap", job.labels.length ? className(job.labels[i]) : "#" + (i + 1));
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

  function buildStrip() {
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

  function fillCell(f) {
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

  function drawFrame(step) {
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

  function scheduleDraw() {
    if (drawPending) return;
    drawPending = true;
    requestAnimationFrame(() => {
      drawPending = false;
      if (job && job.follow && job.lastStep) drawFrame(job.lastStep);
    });
  }

  function updateProgress() {
    const pct = job && job.steps ? (100 * job.lastStep) / job.steps : 0;
    $("progress-bar").style.width = pct.toFixed(1) + "%";
    const scrub = $("scrub");
    scrub.max = String(Math.max(1, job ? job.lastStep : 1));
    $("scrub-row").hidden = !job || job.lastStep === 0;
    $("strip").dataset.frames = String(job ? job.framesSeen : 0);
  }

  // ------------------------------------------------------------------ the socket

  // auth is read on every (re)connect: a socket that connects with the token gets the overview pushes.
  // A token the server refused is not sent again until the field changes (the page still connects, and
  // says so); a new one is sent on the open socket ("auth").
  let tokenRefused = false;
  const socket = io({
    transports: ["websocket", "polling"],
    auth: (cb) => cb(currentToken() && !tokenRefused ? { token: currentToken() } : {}),
  });
  if (tokenField) {
    tokenField.addEventListener("change", () => {
      tokenRefused = false;
      localStorage.setItem(TOKEN_KEY, currentToken());
      if (!socket.connected || !currentToken()) return;
      socket.emit("auth", { token: currentToken() }, (res) => {
        if (res && !res.ok) showAlert($("job-error"), res.kind, res.error);
        else hideAlert($("job-error"));
      });
    });
  }

  // the server drops a connection that watches nothing and sends nothing for DDM_UI_IDLE_S; it comes
  // back when the user does
  function reconnectOnActivity() {
    const again = () => {
      for (const ev of ["pointerdown", "keydown", "focus"]) window.removeEventListener(ev, again);
      if (!socket.connected) socket.connect();
    };
    for (const ev of ["pointerdown", "keydown", "focus"]) window.addEventListener(ev, again);
  }

  // the pill: the page's connection, and whether a router serves (a descriptor and a live router
  // heartbeat in the cluster overview): connected to a cluster where no router serves is not "live"
  let connected = false;
  let noRouter = null; // why no router serves (null: one does, or not known yet)

  function updatePill() {
    if (!connected) return;
    const pill = $("conn");
    pill.textContent = noRouter ? "no router serving" : "live";
    pill.className = "pill " + (noRouter ? "pill-wait" : "pill-ok");
    pill.title = noRouter || "connected; a router serves jobs";
  }

  function routerState(c) {
    if (!c.deployment) return c.deployment_error || "no router has published its deployment";
    const live = (c.workers || []).some((w) => w.role === "router" && w.alive);
    return live ? null : "the deployment is published, but no router has a live heartbeat";
  }

  socket.on("connect", () => {
    connected = true;
    updatePill();
    if (job) sendWatch();
  });
  socket.on("disconnect", (reason) => {
    connected = false;
    const pill = $("conn");
    const idle = reason === "io server disconnect"; // the server's idle timeout: no retry by itself
    pill.textContent = idle ? "idle: disconnected, click to reconnect" : "disconnected, retrying…";
    pill.className = "pill pill-bad";
    pill.title = "";
    if (idle) reconnectOnActivity();
  });
  socket.on("connect_error", (err) => {
    connected = false;
    const pill = $("conn");
    const refused = err && err.data && err.data.kind; // the server refused the token (no retry by itself)
    pill.textContent = refused ? "token refused" : "cannot reach the UI server, retrying…";
    pill.className = "pill pill-bad";
    pill.title = refused ? err.message : "";
    if (refused) {
      showAlert($("job-error"), err.data.kind, err.message);
      if (tokenField) tokenField.focus();
      tokenRefused = true;
      socket.connect(); // without the token: the page works, reads wait for a right one
    }
  });

  socket.on("job", (info) => {
    if (!job || info.job_id !== job.id) return;
    job.status = info.status;
    setStatus(info.status, info.degraded);
    setupJob(info);
    showQueue(info.status === "queued" ? info.queue : null);
    const note = $("job-degraded");
    note.hidden = !info.degraded;
    note.textContent = info.degraded ? "Degraded: " + info.degraded + ". These images are not the full model." : "";
    if (info.status === "done" && info.result_png) {
      const a = $("download");
      setDownload(a, info.result_png + "?download=1", "ddm-" + job.id + ".png");
      a.hidden = false;
      $("stage").dataset.done = "1";
      if (job.lastStep) drawFrame(job.follow ? job.lastStep : job.shown || job.lastStep);
      if (deployment && deployment.decoder && !job.decoded) showDecoded(job);
    } else if (info.status === "failed" || info.status === "expired") {
      showAlert($("job-error"), "failed", info.error || "the router gave no reason");
    }
    refreshRecentSoon();
  });

  socket.on("frame", (f) => {
    if (!job || f.job_id !== job.id) return;
    if (f.step <= job.lastStep) return; // already have it (a reconnect replays from the start)
    if (!job.n) {
      job.n = f.n;
      setupJob({ n: f.n });
    }
    const shape = f.shape || LEGACY_SHAPE; // a server from before sample spaces sent 1x32x32 only
    if (shape.join("x") !== job.shape.join("x")) {
      job.shape = shape.slice(); // the job's own frames say what they are (a deployment changed since)
      if (job.n) buildTiles();
    }
    const rec = {
      step: f.step,
      t: f.t,
      experts: f.experts,
      missing: f.missing || [],
      weights: f.weights,
      served: f.served || null, // [n] experts that computed each image (weights are rounded)
      latency_ms: f.latency_ms,
      compute_ms: f.compute_ms,
      pixels: f.pixels ? b64ToBytes(f.pixels) : null,
      channels: f.channels || 1,
      preview: !!f.preview, // a latent deployment's linear preview, not a decoding
    };
    job.frames[f.step] = rec;
    job.lastStep = f.step;
    job.framesSeen += 1;
    if (job.steps < f.step) {
      job.steps = f.step;
      buildStrip();
    }
    fillCell(rec);
    updateProgress();
    if (job.follow) scheduleDraw();
    announce("ddm:frame", { id: job.id, step: f.step });
  });

  // ------------------------------------------------------------------ replay / scrub

  function stopPlaying() {
    if (playing !== null) clearInterval(playing);
    playing = null;
    $("play").textContent = "▶";
  }

  $("scrub").addEventListener("input", () => {
    if (!job) return;
    stopPlaying();
    const step = Number($("scrub").value);
    job.follow = step >= job.lastStep;
    drawFrame(step);
  });

  $("play").addEventListener("click", () => {
    if (!job || !job.lastStep) return;
    if (playing !== null) return stopPlaying();
    let step = 1;
    job.follow = false;
    $("play").textContent = "❚❚";
    const every = Math.max(16, Math.min(120, 3000 / job.lastStep));
    playing = setInterval(() => {
      drawFrame(step);
      step += 1;
      if (step > job.lastStep) {
        stopPlaying();
        job.follow = true;
      }
    }, every);
  });

  window.addEventListener("resize", () => {
    if (!job || !job.n) return;
    const old = job.canvases.length ? job.canvases[0].width : 0;
    if (old !== job.shape[2] * tileLayout().scale) {
      buildTiles();
      if (job.lastStep) drawFrame(job.follow ? job.lastStep : job.shown || job.lastStep);
    }
  });

  // ------------------------------------------------------------------ strip tooltip

  const tooltip = $("tooltip");

  $("strip").addEventListener("mousemove", (ev) => {
    const cell = ev.target.closest(".cell");
    if (!cell || !job) return (tooltip.hidden = true);
    const step = Number(cell.dataset.step);
    const f = job.frames[step];
    tooltip.replaceChildren();
    tooltip.append(el("div", "tt-title", "step " + step + " of " + job.steps + (f ? " · t = " + f.t.toFixed(3) : "")));
    if (!f) {
      tooltip.append(el("div", "muted", "not computed yet"));
    } else {
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
        const label = job.labels.length ? className(job.labels[i]) : "#" + (i + 1);
        if (!groups.has(key)) groups.set(key, []);
        if (!groups.get(key).includes(label)) groups.get(key).push(label);
      });
      const lines = Array.from(groups.entries())
        .slice(0, 12)
        .map(([key, labels]) => (job.labels.length ? "" : "image ") + labels.join(", ") + " → " + key);
      if (groups.size > 12) lines.push("… " + (groups.size - 12) + " more");
      tooltip.append(el("div", "tt-weights mono", "router weights\n" + lines.join("\n")));
    }
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

  // ------------------------------------------------------------------ cluster panel

  const DEVICE_NAMES = { neuron: "AWS Trainium", cuda: "NVIDIA GPU", gpu: "GPU", cpu: "CPU", "cpu-traced": "CPU" };

  function deviceName(device) {
    if (!device) return "?";
    return DEVICE_NAMES[device] || device;
  }

  function renderCluster(c) {
    if (!c) return;
    if ("deployment" in c) {
      applyDeployment(c.deployment, c.deployment_error);
      noRouter = routerState(c);
      updatePill();
    }
    const errors = $("cluster-errors");
    errors.replaceChildren();
    for (const e of c.errors || []) errors.append(el("p", "cluster-error", e));

    // experts: deployment entries plus any expert id a worker serves
    liveDevices = {};
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
    renderLegend();

    // nodes: one card per region/host with its workers
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
    const jobsQ = c.queues && c.queues.jobs;
    $("cluster-updated").textContent =
      (jobsQ ? "jobs waiting for a router: " + jobsQ.messages + " · " : "") + "updated " + new Date(c.time * 1000).toLocaleTimeString();
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

  // ------------------------------------------------------------------ recent jobs

  const recentRows = new Map(); // job_id -> {tr, status}

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
      img.loading = "lazy";
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
      el("td", null, labelsText(j.labels)),
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

  socket.on("overview", (o) => {
    renderCluster(o.cluster);
    if (o.jobs) renderRecent(o.jobs);
  });

  // ------------------------------------------------------------------ start

  const m = /^#job=([A-Za-z0-9_-]{1,64})$/.exec(location.hash);
  if (m) {
    // a reload: watch the job again once connected (the server replays its steps)
    job = newJob(m[1], null);
    $("stage").dataset.jobId = m[1];
    $("job-title").textContent = "Job " + m[1].slice(0, 8);
  }
})();
