// ddm web UI: who the page is signed in as (GET /api/me), the key's quota left, "My jobs", and the count
// of other users' jobs (the server sends only counts: webui/keys.py redact). Only when the server asks
// for a key or token (the sign-in field exists).

import { $ } from "./dom.js";
import { currentToken, rememberToken, tokenField } from "./auth.js";
import { socket } from "./connection.js";

const REFRESH_MS = 3000; // at most one /api/me per overview push period

function quotaText(q) {
  if (!q) return "";
  const parts = [];
  if (q.rate_per_min !== null) parts.push(Math.floor(q.tokens) + " of " + q.rate_per_min + " jobs left this minute");
  if (q.max_jobs !== null) parts.push(q.active_jobs + " of " + q.max_jobs + " jobs queued or running");
  return parts.length ? " · " + parts.join(" · ") : " · no quota";
}

function render(me) {
  const line = $("who");
  line.hidden = false;
  $("sign-out").hidden = !currentToken();
  if (!me) {
    line.textContent = currentToken() ? "This key or token was refused." : "Not signed in: enter an API key.";
    $("recent-title").textContent = "Recent jobs";
    return;
  }
  const name = me.user ? "Signed in as " + me.user + " (" + me.scope + ")" : "Signed in with the admin token";
  line.textContent = name + quotaText(me.quota);
  $("recent-title").textContent = me.admin ? "All jobs" : "My jobs";
}

// Asked only once the server took the key (its socket got an overview, or accepted the key typed in):
// a wrong key is never sent over HTTP from here, where the browser would log its 401 as an error.
let last = 0;
let accepted = null; // the key the server last took (not what the field holds while it is typed in)
function refreshWho(force) {
  if (!accepted || (!force && Date.now() - last < REFRESH_MS)) return;
  last = Date.now();
  fetch("/api/me", { headers: { Authorization: "Bearer " + accepted } })
    .then((r) => (r.ok ? r.json() : null))
    .then(render)
    .catch(() => {});
}

function renderOthers(others) {
  const line = $("recent-others");
  const counts = Object.entries(others || {}).filter(([, n]) => n > 0);
  line.hidden = !counts.length;
  line.textContent = "Other users' jobs (not shown): " + counts.map(([status, n]) => n + " " + status).join(", ");
}

if (tokenField) {
  tokenField.addEventListener("change", () => {
    accepted = null; // until the server takes the new one (ddm:auth, or the next overview)
    return currentToken() || render(null);
  });
  document.addEventListener("ddm:auth", (ev) => {
    accepted = ev.detail.ok ? currentToken() : null;
    return accepted ? refreshWho(true) : render(null);
  });
  $("sign-out").addEventListener("click", () => {
    tokenField.value = "";
    rememberToken();
    location.reload();
  });
  socket.on("overview", (o) => {
    renderOthers(o.others);
    if (!accepted && currentToken()) accepted = currentToken(); // overviews reach readers only: it was taken
    refreshWho(!last);
  });
  if (!currentToken()) render(null);
}
