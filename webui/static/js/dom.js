// ddm web UI: small DOM helpers shared by every module of the page. Everything that came from a user or
// a server is put into the page with textContent (never innerHTML), so no text can become markup.

export const $ = (id) => document.getElementById(id);

export function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

const COLORS = ["#4f9cf9", "#f5a524", "#2fbf8a", "#e5484d", "#a66cf0", "#22b8cf", "#d6b400", "#e05ca8"];
export const expertColor = (k) => COLORS[((k % COLORS.length) + COLORS.length) % COLORS.length];

// The page's modules follow each other by the "ddm:*" events announced on document (weights.js: the
// router's weights per image).
export function announce(name, detail) {
  document.dispatchEvent(new CustomEvent(name, { detail: detail }));
}

export function b64ToBytes(b64) {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function fmtAgo(unixSeconds) {
  if (!unixSeconds) return "";
  const s = Math.max(0, Date.now() / 1000 - unixSeconds);
  if (s < 60) return Math.round(s) + " s ago";
  if (s < 3600) return Math.round(s / 60) + " min ago";
  if (s < 86400) return Math.round(s / 3600) + " h ago";
  return new Date(unixSeconds * 1000).toLocaleString();
}

export function fmtDuration(seconds) {
  if (seconds === null || seconds === undefined || !isFinite(seconds)) return "";
  if (seconds < 60) return seconds.toFixed(1) + " s";
  return Math.floor(seconds / 60) + " min " + Math.round(seconds % 60) + " s";
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

export function showAlert(box, kind, text) {
  box.hidden = false;
  box.querySelector(".alert-title").textContent = (KIND_TITLES[kind] || "Error") + ": ";
  box.querySelector(".alert-text").textContent = text;
}

export function hideAlert(box) {
  box.hidden = true;
}
