// ddm web UI: the page's entry module (native ES modules, no build step; static/js/ holds its modules,
// one job each). weights.js, the router's weights per image, is the other entry; it follows this one
// by the "ddm:*" events on document.
//
//   js/dom.js         small DOM helpers, expert colours, alerts, the "ddm:*" events
//   js/state.js       what the modules share: the watched job, the serving deployment
//   js/facts.js       the deployment's facts as the page words them (class names, experts, hints)
//   js/auth.js        the sign-in field (an API key or DDM_UI_TOKEN): headers, blob URLs for results
//   js/connection.js  the Socket.IO connection and the pill
//   js/deployment.js  the descriptor: /api/config on load, then every cluster push
//   js/form.js        the job form and its submit
//   js/job.js         the job on stage: watching it, its title, status and progress
//   js/live.js        the socket's "job" and "frame" events for the watched job
//   js/tiles.js       one canvas per image, sized to the stage, drawn from a frame
//   js/strip.js       one bar per step, and its tooltip
//   js/playback.js    scrubbing and replaying the steps
//   js/cluster.js     the cluster panel: experts, nodes, workers
//   js/recent.js      the Recent jobs table
//   js/who.js         who is signed in, the key's quota left, "My jobs", other users' jobs as counts

import "./js/live.js";
import "./js/playback.js";
import "./js/recent.js";
import "./js/who.js";
import { loadConfig } from "./js/deployment.js";
import { watchFromHash } from "./js/job.js";

loadConfig();
watchFromHash();
