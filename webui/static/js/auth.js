// ddm web UI: the sign-in field, for an API key (`ddm keys create`) or DDM_UI_TOKEN. It exists only when
// the server asks for one; what is typed is kept for this browser tab's session (sessionStorage: gone
// when the tab closes, never in a URL or on disk). With a key every read needs it: fetches send it as a
// Bearer header, the socket on connect (auth), and images come through fetch as blob URLs (an <img> or a
// link cannot send a header).

import { $ } from "./dom.js";

const TOKEN_KEY = "ddm-ui-token";
localStorage.removeItem(TOKEN_KEY); // where pages before API keys kept the token: not on disk any more
export const tokenField = $("token");
if (tokenField) tokenField.value = sessionStorage.getItem(TOKEN_KEY) || "";

// keep what the field holds for this tab's session
export function rememberToken() {
  sessionStorage.setItem(TOKEN_KEY, currentToken());
}

export function currentToken() {
  return tokenField ? tokenField.value.trim() : "";
}

export function authHeaders() {
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

export function setImageSrc(img, url) {
  authedUrl(url).then((u) => (img.src = u)).catch(() => {});
}

export function setDownload(a, url, filename) {
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
