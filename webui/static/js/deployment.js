// ddm web UI: the serving router's descriptor (strategies, defaults, class names, experts, sample
// space): on load from /api/config, then with every cluster push, so a router that starts (or changes)
// later shows up.

import { $, announce, hideAlert, showAlert } from "./dom.js";
import { state } from "./state.js";
import { renderLegend } from "./facts.js";
import { updatePill } from "./connection.js";
import { formForDeployment, updateSummary } from "./form.js";
import { tilesForDeployment } from "./tiles.js";

let deploymentKey = null;

export function applyDeployment(dep, error) {
  const banner = $("dep-error");
  const submit = $("submit");
  if (!dep) {
    showAlert(banner, "no_deployment", error || "no router has published its deployment");
    $("dep-name").textContent = "no router serving";
    submit.disabled = true; // nothing could run it: say so instead of offering a job
    submit.title = "no router serves a deployment yet";
    return;
  }
  const prompted = dep.conditioning_kind === "text";
  if ($("classes").querySelectorAll("input").length !== dep.class_names.length || prompted === $("prompt-field").hidden) {
    // another number of classes, or prompts instead of labels (or back): the server draws the form
    location.reload();
    return;
  }
  hideAlert(banner);
  submit.disabled = false;
  submit.title = "";
  const key = JSON.stringify([
    dep.name, dep.strategies, dep.default_strategy, dep.default_guidance, dep.class_names, dep.experts, dep.sampling,
    dep.sample_space, dep.conditioning_kind, dep.example_prompts, dep.max_prompt_chars,
  ]);
  if (key === deploymentKey) return;
  deploymentKey = key;
  state.deployment = dep;
  $("dep-name").textContent = dep.name;
  // what one sample is (the server's words: SampleSpace.describe), above the experts' cards
  $("sample-space").hidden = !dep.sample_text;
  $("sample-space").textContent = dep.latent_text
    ? "samples " + dep.latent_text + "; each step shows a linear preview of the latent"
    : dep.sample_text
      ? "samples " + dep.sample_text
      : "";
  state.classNames = dep.class_names.slice();
  state.prompted = prompted;
  if (dep.null_label !== undefined) state.nullLabel = dep.null_label;
  if (dep.null_name) state.nullName = dep.null_name;
  formForDeployment(dep);
  state.experts = {};
  for (const e of dep.experts || []) state.experts[e.id] = e;
  tilesForDeployment();
  renderLegend();
  updateSummary();
  announce("ddm:deployment", { dep: dep });
}

export function loadConfig() {
  fetch("/api/config")
    .then((r) => r.json())
    .then((cfg) => {
      applyDeployment(cfg.deployment, cfg.deployment_error);
      if (!cfg.deployment) {
        state.noRouter = cfg.deployment_error || "no router has published its deployment";
        updatePill();
      }
    })
    .catch(() => {});
}
