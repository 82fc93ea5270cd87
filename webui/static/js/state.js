// ddm web UI: what the page's modules share, in one object (a module cannot assign another's binding):
// the watched job and the serving deployment, as its descriptor says (on load from /api/config, then
// with every cluster push).

export const state = {
  job: null, // the watched job (job.js newJob)
  deployment: null, // the last descriptor applied (deployment.js)
  experts: {}, // id -> {id, framework, device, classes, trained_on, card_text, ...}
  liveDevices: {}, // expert id -> Set of devices of its live workers (cluster.js)
  classNames: ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"], // the deployment's, once known
  nullLabel: 10, // the null label: an unconditional image (the deployment says so too)
  nullName: "unconditional",
  prompted: false, // the deployment reads a prompt (text conditioning), not class labels: the prompt box
  noRouter: null, // why no router serves (null: one does, or not known yet)
};
