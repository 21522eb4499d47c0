// The what-if page: state in the URL hash, controls bound to it, one server round trip per change
// (debounced), charts redrawn from the library's JSON. No model logic here: every number comes from
// the server, which calls the crossover library.

import { COLORS, esc, fmt, lineChart, stackedBars } from "./chart.js";
import { initMeasured, measuredOverlay, refreshMeasured, restoreMeasured } from "./measured.js";
import { initSim, renderSim, runSim } from "./sim.js";

export const state = {
  tab: "whatif", model: "", hardware: "", tp: "auto", engine: "", cost: "", method: "eagle", draft: "llama-3.2-1b",
  k: 3, acc: "rate", acceptance: 0.7, tau: 2.5, context: 2048, mix: 0, prompt: 1024, output: 256,
  bmin: 1, bmax: 512, at: 32, workload: "sharegpt", levels: "1,8,32,64,128", num_prompts: 200, latency: "tpot",
  sim: 0, files: "", axis: "", fit: 0,
};
// keys that redraw no what-if: the tabs', the simulation's, the measured panel's (it refreshes itself)
const LOCAL_KEYS = new Set(["tab", "workload", "levels", "num_prompts", "latency", "sim", "files", "fit"]);
const DEBOUNCE_MS = 25;
export let options = null;
export let last = null; // the last what-if response (curves and breakdown)
window.crossoverTimings = []; // {total, roundTrip, server} per redraw, ms (read by the browser test)

const $ = (id) => document.getElementById(id);

export function query(extra = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries({ ...state, ...extra })) if (v !== "" && v !== null) q.set(k, String(v));
  return q.toString();
}

export async function api(path, init = {}) {
  const res = await fetch(path, init);
  let body;
  try { body = await res.json(); } catch { body = { error: `HTTP ${res.status}` }; }
  if (!res.ok) throw new Error(body.error || `HTTP ${res.status}`);
  return body;
}

export function showError(msg) {
  const el = $("error");
  el.textContent = msg || "";
  el.hidden = !msg;
}

function readHash() {
  const q = new URLSearchParams(location.hash.replace(/^#/, ""));
  for (const key of Object.keys(state)) {
    if (!q.has(key)) continue;
    const v = q.get(key);
    state[key] = typeof state[key] === "number" ? (v === "" || isNaN(Number(v)) ? state[key] : Number(v)) : v;
  }
}

export function writeHash() {
  history.replaceState(null, "", "#" + query());
}

// ------------------------------------------------------------------ controls

const logOf = (v) => Math.log2(Math.max(v, 1));
const fromLog = (v) => Math.round(Math.pow(2, Number(v)));

function syncControls() {
  document.querySelectorAll("[data-key]").forEach((el) => {
    const key = el.dataset.key, v = state[key];
    if (el.type === "radio") el.checked = el.value === v;
    else if (el.type === "checkbox") el.checked = !!Number(v);
    else if (el.dataset.log) el.value = logOf(v);
    else el.value = v;
    const out = $(`${el.id}-out`);
    if (out) out.textContent = key === "acceptance" ? Number(v).toFixed(2) : fmt(Number(v), 4);
  });
  $("tau").max = state.k + 1;
  $("draft-row").classList.toggle("off", state.method !== "draft");
  $("acceptance-row").classList.toggle("off", state.acc !== "rate");
  $("tau-row").classList.toggle("off", state.acc !== "tau");
  document.querySelectorAll(".mixrow").forEach((el) => el.classList.toggle("off", !Number(state.mix)));
  $("context").disabled = !!Number(state.mix);
  for (const tab of ["whatif", "sim"]) {
    $(`tab-${tab}`).classList.toggle("active", state.tab === tab);
    $(`panel-${tab}`).hidden = state.tab !== tab;
  }
}

function onControl(ev) {
  const el = ev.target, key = el.dataset.key;
  if (!key) return;
  let v;
  if (el.type === "checkbox") v = el.checked ? 1 : 0;
  else if (el.dataset.log) v = fromLog(el.value);
  else if (el.type === "range" || el.type === "number") v = Number(el.value);
  else v = el.value;
  state[key] = v;
  if (key === "k" && state.tau > state.k + 1) state.tau = state.k + 1;
  if (key === "bmin" && state.bmax <= state.bmin) state.bmax = state.bmin * 2;
  if (key === "bmax" && state.bmin >= state.bmax) state.bmin = Math.max(1, Math.floor(state.bmax / 2));
  syncControls();
  writeHash();
  if (key === "latency") renderSim();
  if (key === "axis") refreshMeasured();
  if (!LOCAL_KEYS.has(key)) schedule();
}

function fillSelect(id, items, label = (x) => x, value = (x) => x) {
  $(id).innerHTML = items.map((x) => `<option value="${esc(value(x))}">${esc(label(x))}</option>`).join("");
}

// ------------------------------------------------------------------ the round trip

let timer = null, policyTimer = null, changedAt = null, seq = 0, inflight = null;
const POLICY_DELAY_MS = 150;

export function schedule() {
  if (changedAt === null) changedAt = performance.now();
  clearTimeout(policyTimer);
  $("policy").classList.add("stale");
  clearTimeout(timer);
  timer = setTimeout(refresh, DEBOUNCE_MS);
}

async function refresh() {
  const mine = ++seq;
  if (inflight) inflight.abort();
  inflight = new AbortController();
  const t0 = performance.now();
  let d;
  try {
    d = await api("/api/whatif?" + query(), { signal: inflight.signal });
  } catch (e) {
    if (e.name === "AbortError" || mine !== seq) return;
    changedAt = null;
    showError(e.message);
    document.body.dataset.state = "error";
    return;
  }
  if (mine !== seq) return;
  const t1 = performance.now();
  showError(d.warnings ? "warning: " + d.warnings.join("; ") : "");
  last = d;
  render();
  const t2 = performance.now();
  const timing = { total: t2 - (changedAt ?? t0), roundTrip: t1 - t0, server: d.server_ms, render: t2 - t1 };
  window.crossoverTimings.push(timing);
  changedAt = null;
  $("timing").textContent = `charts redrawn ${timing.total.toFixed(0)} ms after the change (server round trip ` +
    `${timing.roundTrip.toFixed(0)} ms, of which the model ${timing.server.toFixed(0)} ms; drawing ${timing.render.toFixed(0)} ms)`;
  document.body.dataset.state = "ready";
  document.body.dataset.redraws = String(window.crossoverTimings.length);
  refreshMeasured();
  policyTimer = setTimeout(() => refreshPolicy(mine, timing), POLICY_DELAY_MS);
}

// The best-k schedule comes in a second request (the library sweeps every k at every batch), sent
// once the controls rest for POLICY_DELAY_MS, so the charts never wait behind it while a slider moves.
async function refreshPolicy(mine, timing) {
  const t0 = performance.now();
  let pol;
  try {
    pol = await api("/api/policy?" + query(), { signal: inflight.signal });
  } catch (e) {
    if (e.name !== "AbortError" && mine === seq) showError(e.message);
    return;
  }
  if (mine !== seq) return;
  renderPolicy(pol);
  $("policy").classList.remove("stale");
  timing.policy = performance.now() - t0;
  $("timing").textContent += `; best-k schedule ${timing.policy.toFixed(0)} ms later`;
  document.body.dataset.policy = String(mine);
}

// ------------------------------------------------------------------ drawing

export function render() {
  if (!last) return;
  const p = last.predict, inp = last.inputs;
  const cb = p.crossover_batch;
  const bmax = p.points[p.points.length - 1].batch, bmin = p.points[0].batch;
  $("crossover").textContent = cb === null ? "none" : `batch ${cb.toFixed(1)}`;
  const down = p.crossings.length && p.crossings[0].direction === "down";
  $("regime").innerHTML = cb === null
    ? `in batch ${fmt(bmin)}–${fmt(bmax)}: speculation is ${p.regime === "always_faster" ? "faster" : "slower"} throughout`
    : `speculation ${down ? "stops" : "starts"} paying off there${p.crossover_within_memory ? "" : " (beyond the memory limit)"}` +
      (p.crossover_at_graph_limit ? `: the ${p.crossover_at_graph_limit.server} server's CUDA-graph limit ` +
        `(${p.crossover_at_graph_limit.limit} ${esc(p.crossover_at_graph_limit.unit)}; --cuda-graph-max moves it)` : "");
  if (Number(state.mix)) $("context-out").textContent = `${fmt(inp.context, 5)} (prompt + output / 2)`;
  const acc = inp.acceptance_kind === "tau" ? `tau ${inp.acceptance}` : `acceptance ${inp.acceptance}`;
  $("summary").innerHTML = `${esc(inp.model)} on ${inp.tp} × ${esc(inp.hardware)}${inp.tp_auto ? " (auto TP)" : ""}, ` +
    `${esc(inp.weight_dtype)} weights, context ${fmt(inp.context, 5)}${inp.prompt_len !== null ? ` (prompt ${fmt(inp.prompt_len, 5)} + output ${fmt(inp.output_len, 5)})` : ""}; ` +
    `${esc(inp.method)}${inp.draft ? ` (${esc(inp.draft)})` : ""}, k = ${inp.k}, ${acc} → ${p.tau.toFixed(3)} tokens/step; ` +
    `memory limit: batch ${p.max_batch_off} off, ${p.max_batch_on} on` + (last.notes.length ? `<br><span class="muted">${esc(last.notes.join("; "))}</span>` : "");
  const ov = measuredOverlay();
  const vlines = [
    { id: "crossover-line", x: cb, label: cb === null ? "" : `crossover ${cb.toFixed(1)}`, color: COLORS.cross },
    { x: p.max_batch_on, label: `memory limit ${p.max_batch_on}`, color: COLORS.memory, dash: "5 3" },
  ];
  const xy = (key) => p.points.map((q) => [q.batch, q[key]]);
  lineChart($("chart-tput"), {
    title: "output tokens/s vs batch", xlabel: "batch (sequences decoding)", ylabel: "tokens/s", xlog: true, yzero: true,
    series: [
      { id: "series-off", label: "speculation off", color: COLORS.off, dash: "6 3", points: xy("tokens_per_s_off") },
      { id: "series-on", label: "speculation on", color: COLORS.on, points: xy("tokens_per_s_on") },
      ...ov.throughput,
    ], vlines,
  });
  lineChart($("chart-speedup"), {
    title: "speedup (on / off) vs batch", xlabel: "batch", ylabel: "speedup", xlog: true, legendAt: "bottom-left",
    series: [{ id: "series-speedup", label: "predicted", color: COLORS.on, points: xy("speedup") }, ...ov.speedup],
    hlines: [{ y: 1, color: "#888" }], vlines,
  });
  const bd = last.breakdown;
  stackedBars($("chart-breakdown"), ["off", "on"].map((arm) => ({ label: arm, parts: breakdownParts(bd, arm) })), {
    title: `one step by op at batch ${fmt(bd.batch, 4)}, context ${fmt(bd.context, 5)} (ms; on = drafts + verify)`,
    tips: Object.fromEntries(bd.ops.map((o) => [o.op, `${o.bound_on}-bound when verifying, priced by ${o.priced_by}`])),
  });
}

// The library's breakdown (predict with breakdown=batch) as bar segments: the target's ops, the
// rest of its forward (per-layer kernel gaps), then every other step term that costs anything.
const TERM_LABELS = { step_overhead: "engine step", draft_forwards: "draft", draft_step_overhead: "draft launches",
  draft_prefill: "draft prefill", spec_overhead: "spec bookkeeping", spec_overhead_per_seq: "spec per sequence",
  proposer_lookup: "n-gram lookup" };

function breakdownParts(bd, arm) {
  const parts = {};
  let ops = 0;
  for (const o of bd.ops) {
    const v = o[`${arm}_ms`] || 0;
    parts[o.op] = v;
    ops += v;
  }
  parts["kernel gaps"] = Math.max(0, bd.terms.target_forward[`${arm}_ms`] - ops);
  for (const [term, v] of Object.entries(bd.terms)) {
    if (term !== "target_forward" && v[`${arm}_ms`] > 0) parts[TERM_LABELS[term] || term] = v[`${arm}_ms`];
  }
  return parts;
}

function copyButton(text) {
  return `<button type="button" class="copy" data-copy="${esc(text)}">Copy</button>`;
}

function renderPolicy(pol) {
  $("schedule").innerHTML = "<tr><th>batch</th><th>best k</th></tr>" + pol.schedule.map((r) =>
    `<tr><td>${r.batch_min}–${r.batch_max}</td><td>${r.k === 0 ? "off" : r.k}</td></tr>`).join("");
  const g = pol.gains;
  $("rule").innerHTML = `${esc(pol.rule)}<br><span class="muted">gain over always-on: mean ${g.mean_gain_over_always_on}×, ` +
    `max ${g.max_gain_over_always_on}×; over always-off: mean ${g.mean_gain_over_always_off}×</span>`;
  const c = pol.engine_configs;
  const block = (title, text, notes) => `<div class="config"><h4>${esc(title)}${text ? copyButton(text) : ""}</h4>` +
    (text ? `<pre>${esc(text)}</pre>` : "") + (notes || []).map((n) => `<p class="note">${esc(n)}</p>`).join("") + "</div>";
  const trt = c.tensorrt_llm.speculative_config;
  $("configs").innerHTML =
    block("vLLM", c.vllm.flag, c.vllm.notes) +
    block("SGLang", c.sglang.flags, c.sglang.notes) +
    block("TensorRT-LLM (speculative_config)", trt ? JSON.stringify(trt, null, 2) : "", c.tensorrt_llm.notes);
}

document.addEventListener("click", async (ev) => {
  const b = ev.target.closest("button.copy");
  if (!b) return;
  try { await navigator.clipboard.writeText(b.dataset.copy); b.textContent = "Copied"; } catch { b.textContent = "Select it"; }
  setTimeout(() => { b.textContent = "Copy"; }, 1200);
});

// ------------------------------------------------------------------ start

async function start() {
  try {
    options = await api("/api/options");
  } catch (e) {
    showError(e.message);
    return;
  }
  const d = options.defaults;
  Object.assign(state, { model: d.model, hardware: d.hardware, engine: options.engines[0], cost: options.cost_modes[0],
    method: d.method, k: d.k, acceptance: d.acceptance, context: d.context });
  readHash();
  fillSelect("model", options.models, (m) => `${m.name} (${fmt(m.params_b)}B${m.moe ? " MoE" : ""})`, (m) => m.name);
  fillSelect("draft", [{ name: "self" }, ...options.models], (m) => m.name === "self" ? "self (the target itself)" : m.name, (m) => m.name);
  fillSelect("hardware", options.hardware, (h) => `${h.name} (${fmt(h.memory_gb)} GB)`, (h) => h.name);
  fillSelect("method", options.methods);
  fillSelect("engine", options.engines);
  fillSelect("cost", options.cost_modes);
  fillSelect("workload", options.workloads);
  $("engine").disabled = !options.takes.engine;
  $("cost").disabled = !options.takes.cost;
  $("version").textContent = options.version;
  syncControls();
  writeHash();
  document.querySelectorAll("[data-key]").forEach((el) => {
    el.addEventListener(el.type === "range" ? "input" : "change", onControl);
  });
  document.querySelectorAll(".tab").forEach((b) => b.addEventListener("click", () => {
    state.tab = b.dataset.tab; syncControls(); writeHash();
    if (state.tab === "sim") renderSim(); else render(); // drawn again now they are on screen (their labels' layout)
  }));
  $("copy-link").addEventListener("click", async () => {
    try { await navigator.clipboard.writeText(location.href); $("copy-link").textContent = "Link copied"; }
    catch { window.prompt("Copy this link", location.href); }
    setTimeout(() => { $("copy-link").textContent = "Copy link"; }, 1200);
  });
  window.addEventListener("hashchange", () => {
    const files = state.files;
    readHash(); syncControls(); schedule();
    if (state.files !== files) restoreMeasured();
  });
  initMeasured();
  initSim();
  schedule();
  if (state.files) restoreMeasured(); // the uploads the link names, while this server holds them
  if (state.tab === "sim" || Number(state.sim)) runSim(); // a link to the simulation re-runs it
}

start();
