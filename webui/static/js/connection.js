// ddm web UI: the Socket.IO connection (io() is the vendored socket.io.min.js, a classic script loaded
// before the modules) and the pill that says what it is connected to.

import { $, announce, hideAlert, showAlert } from "./dom.js";
import { state } from "./state.js";
import { currentToken, rememberToken, tokenField } from "./auth.js";

// auth is read on every (re)connect: a socket that connects with the token gets the overview pushes.
// A token the server refused is not sent again until the field changes (the page still connects, and
// says so); a new one is sent on the open socket ("auth").
let tokenRefused = false;
export const socket = io({
  transports: ["websocket", "polling"],
  auth: (cb) => cb(currentToken() && !tokenRefused ? { token: currentToken() } : {}),
});
if (tokenField) {
  tokenField.addEventListener("change", () => {
    tokenRefused = false;
    rememberToken();
    if (!socket.connected || !currentToken()) return;
    socket.emit("auth", { token: currentToken() }, (res) => {
      if (res && !res.ok) showAlert($("job-error"), res.kind, res.error);
      else hideAlert($("job-error"));
      announce("ddm:auth", { ok: !!(res && res.ok) }); // who.js asks who it is only for a key taken
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

export function updatePill() {
  if (!connected) return;
  const pill = $("conn");
  const noRouter = state.noRouter;
  pill.textContent = noRouter ? "no router serving" : "live";
  pill.className = "pill " + (noRouter ? "pill-wait" : "pill-ok");
  pill.title = noRouter || "connected; a router serves jobs";
}

export function routerState(c) {
  if (!c.deployment) return c.deployment_error || "no router has published its deployment";
  const live = (c.workers || []).some((w) => w.role === "router" && w.alive);
  return live ? null : "the deployment is published, but no router has a live heartbeat";
}

socket.on("connect", () => {
  connected = true;
  updatePill();
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
