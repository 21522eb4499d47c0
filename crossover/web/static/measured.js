// Measured result files dropped on the page: uploaded to the server (kept there while it runs), each
// file's arm set in the list (the server says what each file names itself; a file that does not say
// whether speculation was on asks for it), read as one sweep by crossover.measured with the page's
// hardware, TP, method and k: its diagnosis, every point against both speed-of-light bounds, and,
// on "Fit to these points", crossover.calibrate's curves beside the model's defaults. The uploads'
// ids, their arms and the fit are in the URL (files=ID:ARM,...&fit=1), so a link or a reload brings
// the panel back while this server holds the files.

import { esc, fmt } from "./chart.js";
import { api, query, render, showError, state, writeHash } from "./app.js";
import { COLORS } from "./chart.js";
import { renderFit, renderPanel } from "./panel.js";

const uploads = []; // {id, name, arm, info}: info from /api/uploads (the file's own arm, format, levels)
let result = null, fitResult = null, gone = [];
let seq = 0, fitSeq = 0, lastKey = null, lastFitKey = null, fitTimer = null;
const FIT_DELAY_MS = 400;
// the page's keys a measured sweep is read with (the rest redraw the what-if only)
const SWEEP_KEYS = ["model", "hardware", "tp", "method", "draft", "k", "mix", "prompt", "output", "axis", "files"];
const $ = (id) => document.getElementById(id);

function syncState() {
  state.files = uploads.map((u) => `${u.id}:${u.arm}`).join(",");
  writeHash();
}

async function upload(file) {
  const res = await api(`/api/upload?name=${encodeURIComponent(file.name)}`, {
    method: "POST", headers: { "X-Crossover": "1", "Content-Type": "application/octet-stream" }, body: file,
  });
  uploads.push({ id: res.id, name: res.name, arm: "auto", info: null });
}

async function describe(list) {
  if (!list.length) return;
  const d = await api(`/api/uploads?ids=${list.map((u) => u.id).join(",")}`);
  const byId = Object.fromEntries(d.uploads.map((x) => [x.id, x]));
  for (const u of list) {
    if (byId[u.id]) { u.info = byId[u.id]; u.name = byId[u.id].name; }
  }
  return d.missing;
}

async function addFiles(files) {
  const before = uploads.length;
  try {
    for (const f of files) await upload(f);
    await describe(uploads.slice(before));
    showError("");
  } catch (e) {
    showError(e.message);
  }
  dropFit();
  syncState();
  listUploads();
  refreshMeasured();
}

// the uploads named in the link (files=ID:ARM,...), as this server still holds them
export async function restoreMeasured() {
  const items = (state.files || "").split(",").filter(Boolean).map((x) => x.split(":"));
  uploads.length = 0;
  for (const [id, arm] of items) uploads.push({ id, name: id, arm: ["on", "off"].includes(arm) ? arm : "auto", info: null });
  gone = [];
  if (uploads.length) {
    try {
      const missing = new Set(await describe(uploads));
      gone = uploads.filter((u) => missing.has(u.id) || !u.info);
      for (const u of gone) uploads.splice(uploads.indexOf(u), 1);
    } catch (e) {
      showError(e.message);
    }
  }
  syncState();
  listUploads();
  lastKey = null;
  refreshMeasured();
}

function armLabel(u, a) {
  if (a !== "auto") return a;
  const own = u.info && u.info.arm;
  return own ? `auto (file: ${own})` : u.info && !u.info.problem ? "set on / off" : "auto";
}

function listUploads() {
  $("uploads").innerHTML = uploads.map((u, i) => {
    const info = u.info || {}, needs = u.arm === "auto" && info.needs_arm;
    const said = info.problem ? `<span class="beats">${esc(info.problem)}</span>`
      : needs ? `<span class="ask">does not say whether speculation was on: set its arm</span>`
        : info.formats ? esc(`${info.formats.join(", ")}: ${info.load_axis} ${info.loads.map((x) => fmt(x)).join(", ")}` +
          `${info.levels > info.loads.length ? ", …" : ""}${info.runs > info.levels ? ` (${info.runs} runs)` : ""}`) : "";
    return `<li class="${needs ? "needs-arm" : ""}${info.problem ? " unreadable" : ""}" data-id="${esc(u.id)}">` +
      `<div class="row"><span class="fname" title="${esc(u.name)}">${esc(u.name)}</span>` +
      `<select data-i="${i}" class="arm" aria-label="arm of ${esc(u.name)}">` +
      ["auto", "on", "off"].map((a) => `<option value="${a}"${a === u.arm ? " selected" : ""}>${esc(armLabel(u, a))}</option>`).join("") +
      `</select><button type="button" data-i="${i}" class="remove" title="remove">×</button></div>` +
      `<div class="said">${said}</div></li>`;
  }).join("") + (gone.length ? `<li class="gone">${gone.length} upload(s) in the link are no longer on this server ` +
    `(it restarted, or kept newer files): upload them again</li>` : "");
}

function sweepKey() {
  return SWEEP_KEYS.map((k) => `${k}=${state[k]}`).join("&");
}

// what stands between the uploads and a sweep: a file that cannot be read, or one whose arm is unset
function blocked() {
  const bad = uploads.filter((u) => u.info && u.info.problem);
  if (bad.length) return bad.map((u) => u.info.problem).join("; ");
  const ask = uploads.filter((u) => u.arm === "auto" && u.info && u.info.needs_arm);
  if (ask.length) {
    return `set the arm of ${ask.map((u) => u.name).join(", ")} in the file list: ` +
      `${ask.length > 1 ? "these files do" : "the file does"} not say whether speculation was on (choose on or off)`;
  }
  return null;
}

export async function refreshMeasured() {
  const key = sweepKey();
  if (key === lastKey && result) { render(); return; } // the what-if moved, not the sweep
  lastKey = key;
  const mine = ++seq;
  if (!uploads.length) {
    result = null;
    fitResult = null;
    $("measured-out").innerHTML = "";
    render();
    return;
  }
  const stop = blocked();
  if (stop) {
    result = null;
    $("measured-out").innerHTML = `<p class="ask" id="measured-ask">${esc(stop)}</p>`;
    document.body.dataset.measured = "blocked";
    render();
    return;
  }
  try {
    const d = await api(`/api/measured?${query()}`);
    if (mine !== seq) return;
    result = d;
  } catch (e) {
    if (mine !== seq) return;
    result = null;
    $("measured-out").innerHTML = `<p class="beats" id="measured-error">measured files: ${esc(e.message)}</p>`;
    document.body.dataset.measured = "error";
    render();
    return;
  }
  renderPanel(result, $("measured-out"));
  if (Number(state.fit)) scheduleFit();
  document.body.dataset.measured = String(mine);
  render();
}

function dropFit() {
  state.fit = 0;
  fitResult = null;
  lastFitKey = null;
}

function scheduleFit() {
  clearTimeout(fitTimer);
  const key = sweepKey();
  if (key === lastFitKey && fitResult) { renderFit(fitResult, result); return; }
  const box = $("fit-out");
  if (box) box.classList.add("stale");
  fitTimer = setTimeout(() => refreshFit(key), FIT_DELAY_MS);
}

async function refreshFit(key) {
  const mine = ++fitSeq;
  const status = $("fit-status");
  if (status) status.textContent = "fitting…";
  let d;
  try {
    d = await api(`/api/calibrate?${query()}`);
  } catch (e) {
    if (mine !== fitSeq) return;
    fitResult = null;
    const box = $("fit-out");
    if (box) { box.classList.remove("stale"); box.innerHTML = `<p class="beats" id="fit-error">fit: ${esc(e.message)}</p>`; }
    return;
  }
  if (mine !== fitSeq || !Number(state.fit)) return;
  fitResult = d;
  lastFitKey = key;
  if (result) renderFit(d, result);
  document.body.dataset.fit = String(mine);
}

// Series for the what-if charts: the measured points at their load (requests in flight) and the
// measured speedup; points beyond a speed-of-light bound drawn red.
export function measuredOverlay() {
  const out = { throughput: [], speedup: [] };
  if (!result) return out;
  const rows = result.physics && result.physics.length ? result.physics : result.points.flatMap((p) => [
    { arm: "off", level: p.level, in_flight: p.level, measured: p.off_output_throughput },
    { arm: "on", level: p.level, in_flight: p.level, measured: p.on_output_throughput }]);
  const bad = (x) => x.beats_physics || x.beats_physics_unless_prefix_caching;
  for (const arm of ["off", "on"]) {
    const r = rows.filter((x) => x.arm === arm);
    const color = arm === "on" ? COLORS.measuredOn : COLORS.measuredOff;
    out.throughput.push({
      id: `measured-${arm}`, label: `measured ${arm}`, color, markers: "square", noscale: true,
      points: r.map((x) => [x.in_flight ?? x.level, x.measured]),
      fills: r.map((x) => (bad(x) ? COLORS.bad : color)), strokes: r.map((x) => (bad(x) ? COLORS.bad : color)),
      tips: r.map((x) => `measured ${arm} at ${result.load_axis} ${fmt(x.level)}: ${fmt(x.measured)} tok/s` +
        (x.bound ? `; decode-only bound ${fmt(x.bound)} (${fmt(x.fraction_of_bound)}×)` : "") +
        (x.bound_with_prefill ? `; with the prefill share ${fmt(x.bound_with_prefill)} (${fmt(x.fraction_of_bound_with_prefill)}×)` : "") +
        (x.beats_physics ? " BEATS PHYSICS" : x.beats_physics_unless_prefix_caching ? " beats physics unless prefix caching is on" : "")),
    });
  }
  if (result.load_axis === "request_rate") return out; // a rate is no batch: its speedups have no place on these axes
  out.speedup.push({ id: "measured-speedup", label: "measured", color: COLORS.measuredOn, markers: "diamond", noscale: true,
    points: result.points.map((p) => [p.level, p.speedup]), tips: result.points.map((p) => `measured speedup ${fmt(p.speedup)} at ${fmt(p.level)}`) });
  return out;
}

export function initMeasured() {
  const dz = $("dropzone");
  dz.addEventListener("dragover", (e) => { e.preventDefault(); dz.classList.add("over"); });
  dz.addEventListener("dragleave", () => dz.classList.remove("over"));
  dz.addEventListener("drop", (e) => { e.preventDefault(); dz.classList.remove("over"); addFiles([...e.dataTransfer.files]); });
  $("file-input").addEventListener("change", (e) => { addFiles([...e.target.files]); e.target.value = ""; });
  $("uploads").addEventListener("change", (e) => {
    if (!e.target.classList.contains("arm")) return;
    uploads[Number(e.target.dataset.i)].arm = e.target.value;
    syncState();
    listUploads();
    refreshMeasured();
  });
  $("uploads").addEventListener("click", (e) => {
    if (!e.target.classList.contains("remove")) return;
    uploads.splice(Number(e.target.dataset.i), 1);
    dropFit();
    syncState();
    listUploads();
    refreshMeasured();
  });
  $("measured-out").addEventListener("click", (e) => {
    const b = e.target.closest("button");
    if (!b) return;
    if (b.id === "fit-run") {
      state.fit = 1;
      writeHash();
      lastFitKey = null;
      if (result) renderPanel(result, $("measured-out"));
      scheduleFit();
    } else if (b.id === "fit-hide") {
      dropFit();
      writeHash();
      if (result) renderPanel(result, $("measured-out"));
    }
  });
}
