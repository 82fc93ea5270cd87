// ddm web UI: the job form: labels (or a text deployment's prompt, its negative prompt and example
// prompts to click), images, steps, strategy, solver, grid, guidance, seed; its summary line and hints;
// the submit over the socket.

import { $, el, hideAlert, showAlert } from "./dom.js";
import { state } from "./state.js";
import { className, evaluationsText, samplingHint, samplingOf, solverStages, strategyHint } from "./facts.js";
import { rememberToken, tokenField } from "./auth.js";
import { socket } from "./connection.js";
import { watch } from "./job.js";

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

// a text deployment's example prompts (the descriptor's, from its deployment file): one click fills the box
function renderExamples(dep) {
  const box = $("examples");
  box.replaceChildren();
  for (const text of dep.example_prompts || []) {
    const b = el("button", "btn-small example-prompt", text);
    b.type = "button";
    b.title = "use this prompt";
    b.addEventListener("click", () => {
      $("prompt").value = text;
      $("prompt").focus();
      updateSummary();
    });
    box.append(b);
  }
  box.hidden = !box.children.length;
  if (dep.conditioning_text) $("prompt-hint").textContent = "read as " + dep.conditioning_text;
}

// a new descriptor: the class chips' names, the strategy, solver and grid menus, the default guidance
export function formForDeployment(dep) {
  renderExamples(dep);
  classBoxes.forEach((b) => (b.parentNode.querySelector("span").textContent = className(Number(b.value))));
  $("classes").classList.toggle("classes-named", state.classNames.some((c, i) => c !== String(i)));
  $("all-classes").textContent = "All " + state.classNames.length;
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
}

function autoStrategy(labels) {
  const dep = state.deployment;
  if (!dep) return null;
  const auto =
    labels.includes(state.nullLabel) && dep.unconditional_strategy ? dep.unconditional_strategy : dep.default_strategy;
  return dep.strategies.includes(auto) ? auto : dep.default_strategy;
}

function followDefault(labels) {
  if (strategyChosen || !state.deployment) return;
  const auto = autoStrategy(labels);
  if (auto && $("strategy").value !== auto) $("strategy").value = auto;
}

function chosenLabels() {
  if (state.prompted) return [state.nullLabel]; // each image of a text job carries the null label
  const chosen = classBoxes.filter((b) => b.checked).map((b) => Number(b.value));
  return unconditionalBox && unconditionalBox.checked ? chosen.concat([state.nullLabel]) : chosen;
}

function numberOrNull(id) {
  const raw = $(id).value.trim();
  if (raw === "") return null;
  const v = Number(raw);
  return Number.isFinite(v) ? v : raw; // the server says what is wrong with a non-number
}

export function updateSummary() {
  const { deployment, nullLabel, nullName } = state;
  const chosen = chosenLabels();
  const n = numberOrNull("n_per_label");
  const images = typeof n === "number" ? chosen.length * n : NaN;
  const steps = numberOrNull("steps");
  const solver = $("solver").value;
  const prompt = $("prompt").value;
  const of = state.prompted ? (prompt ? " of the prompt" : " of the empty prompt (unconditional)") : "";
  const text = chosen.length
    ? (isFinite(images) ? images : "?") + " image" + (images === 1 ? "" : "s") + of + " · " +
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
    // an unconditional image is null on the wire (the number K would be refused: a class past the last)
    labels:
      chosen.length === classBoxes.length && !chosen.includes(state.nullLabel)
        ? "all"
        : chosen.map((y) => (y === state.nullLabel ? null : y)),
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
  if (state.prompted) {
    // a text deployment's job: no labels (each image its null label), the prompt as typed (empty: none,
    // the empty prompt) and the optional negative prompt; the server checks both (schema: check_prompt)
    delete data.labels;
    data.prompt = $("prompt").value || null;
    data.negative_prompt = $("negative_prompt").value || null;
  }
  if (tokenField) {
    data.token = tokenField.value.trim();
    rememberToken();
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
