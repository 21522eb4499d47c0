// The measured panel's contents, drawn from what the server returns: crossover.measured's diagnosis
// (one verdict and its evidence), the physics check with both bounds (decode only, and with the
// sweep's prefill share), and crossover.calibrate's fit with its curves beside the model's defaults.
// Nothing is computed here but percentages for display.

import { COLORS, esc, fmt, lineChart } from "./chart.js";
import { state } from "./app.js";

const VERDICTS = {
  physics: "physics", configuration: "configuration", engine: "the engine", impossible: "impossible point",
  model: "the model", inconclusive: "inconclusive",
};
const pct = (x) => (x === null || x === undefined ? "–" : `${(100 * x).toFixed(1)}%`);
const ln = (x) => (x === null || x === undefined ? "–" : `${x >= 0 ? "+" : ""}${x.toFixed(3)}`);
const copy = (text) => `<button type="button" class="copy" data-copy="${esc(text)}">Copy</button>`;

export function renderPanel(d, el) {
  const cross = d.crossover !== null ? `${d.load_axis} ${fmt(d.crossover, 4)}` : `not reached (${d.side || "no"} side)`;
  let s = `<div class="mhead"><h3>Measured: ${d.points.length} level(s) on the ${esc(d.load_axis)} axis` +
    (d.model ? `, checked as ${esc(d.model)}` : "") + `; measured crossover ${cross}</h3>` +
    (Number(state.fit) ? `<button type="button" id="fit-hide">Hide the fit</button>`
      : `<button type="button" id="fit-run" title="calibrate the model to these points (crossover calibrate)">Fit to these points</button>`) +
    "</div>";
  s += diagnosis(d);
  s += physics(d);
  const notes = [...(d.notes || []), ...(d.warnings || [])];
  if (notes.length) s += `<div id="measured-notes">${notes.map((n) => `<p class="muted">${esc(n)}</p>`).join("")}</div>`;
  s += Number(state.fit) ? `<div id="fit-out" class="stale"><p class="muted" id="fit-status">fitting…</p></div>` : "";
  el.innerHTML = s;
}

// ------------------------------------------------------------------ the diagnosis

function diagnosis(d) {
  const g = d.diagnosis;
  if (!g) {
    return `<div id="diagnosis" class="verdict verdict-none"><b>No diagnosis</b>: the sweep was read without a model ` +
      `(pick the Model and Hardware the files ran)</div>`;
  }
  let s = `<div id="diagnosis" class="verdict verdict-${esc(g.verdict)}" data-verdict="${esc(g.verdict)}">` +
    `<span class="badge">${esc(VERDICTS[g.verdict] || g.verdict)}</span> <span id="verdict-message">${esc(g.message)}</span></div>`;
  s += `<div id="evidence"><h4>Evidence</h4><p class="muted">judged on ${esc(g.judged_on || "")}; engine ${esc(g.engine.label)} ` +
    `(${esc(g.engine.source)}); a level is off its expectation beyond |ln| ${g.tolerance_ln}</p>`;
  const e = g.expectation;
  if (e && e.basis === "off_arm_fit") {
    const params = Object.entries(e.parameters || {}).map(([k, v]) => `${k} ${fmt(v, 3)}`).join(", ");
    s += `<p>Expectation: this engine's host time fitted to the sweep's off arm${params ? ` (${esc(params)}` +
      `${e.at_bound && e.at_bound.length ? `; at a bound: ${esc(e.at_bound.join(", "))}` : ""})` : ""}` +
      `${e.max_ln_off !== null && e.max_ln_off !== undefined ? `, the off arm within |ln| ${e.max_ln_off.toFixed(3)}` : ""}; ` +
      `the on arm priced on it at each level's tau: its crossover ${e.predicted_crossover === null ? `none up to ${fmt(e.searched_up_to)}` : fmt(e.predicted_crossover, 4)}.</p>`;
  } else if (e && e.basis === "serving_simulator") {
    s += `<p>Expectation: the serving simulator's mean end-to-end latency of each arm (compared as off / on); ` +
      `its crossover ${e.predicted_crossover === null ? "none" : fmt(e.predicted_crossover, 4)}.</p>`;
  }
  if (g.levels && g.levels.length) s += levels(g, d.load_axis);
  if (g.load_fit) s += loadFit(g.load_fit);
  if (g.impossible && g.impossible.length) {
    s += `<table id="impossible"><tr><th>arm</th><th>${esc(d.load_axis)}</th><th>measured tok/s</th><th>decode-only bound</th>` +
      `<th>with prefill</th></tr>` + g.impossible.map((c) => `<tr><td>${c.arm}</td><td>${fmt(c.level)}</td><td class="beats">${fmt(c.measured)}</td>` +
      `<td>${fmt(c.bound)}</td><td>${fmt(c.bound_with_prefill)}</td></tr>`).join("") + "</table>";
  }
  if (g.causes && g.causes.length) {
    s += `<h4>Settings that can apply to ${esc(g.engine.label)}</h4><table id="causes"><tr><th>setting</th><th>re-priced</th>` +
      `<th>on tok/s there</th><th>worst ln after</th><th>explains</th></tr>` + g.causes.map((c) =>
      `<tr><td class="text">${esc(c.setting)}</td><td>${c.checked ? "yes" : `no: ${esc(c.why || "")}`}</td>` +
      `<td>${c.checked ? fmt(c.on_expected) : "–"}</td><td>${c.checked ? ln(c.ln_worst_after) : "–"}</td>` +
      `<td>${c.explains === null || c.explains === undefined ? "–" : c.explains ? "yes" : "no"}</td></tr>`).join("") + "</table>";
  }
  if (g.report && g.report.length) {
    const text = g.report.join("\n");
    s += `<div class="config" id="report"><h4>What to report ${copy(text)}</h4><pre>${esc(text)}</pre></div>`;
  }
  return s + "</div>";
}

function levels(g, axis) {
  const rows = g.levels;
  if ("e2el_on_measured" in rows[0]) {  // a rate sweep: judged on latency
    return `<table id="diag-levels"><tr><th>${esc(axis)}</th><th>e2e off ms</th><th>expected</th><th>e2e on ms</th><th>expected</th>` +
      `<th>shortfall ln</th></tr>` + rows.map((r) => `<tr><td>${fmt(r.level)}</td><td>${fmt(r.e2el_off_measured)}</td>` +
      `<td>${fmt(r.e2el_off_expected)}</td><td>${fmt(r.e2el_on_measured)}</td><td>${fmt(r.e2el_on_expected)}</td>` +
      `<td class="${r.ln_shortfall > g.tolerance_ln ? "beats" : ""}">${r.status ? esc(r.status) : ln(r.ln_shortfall)}</td></tr>`).join("") + "</table>";
  }
  return `<table id="diag-levels"><tr><th>${esc(axis)}</th><th>on tok/s</th><th>expected</th><th>ln</th><th>on TPOT ms</th><th>expected</th>` +
    `<th>ln</th><th>off tok/s</th><th>expected</th><th>shortfall</th></tr>` + rows.map((r) => `<tr><td>${fmt(r.level)}</td>` +
    `<td>${fmt(r.on_measured)}</td><td>${fmt(r.on_expected)}</td><td>${ln(r.ln_on)}</td><td>${fmt(r.tpot_on_measured)}</td>` +
    `<td>${fmt(r.tpot_on_expected)}</td><td>${ln(r.ln_tpot_on)}</td><td>${fmt(r.off_measured)}</td><td>${fmt(r.off_expected)}</td>` +
    `<td class="${r.ln_shortfall > g.tolerance_ln ? "beats" : ""}">${r.status ? esc(r.status) : ln(r.ln_shortfall)}</td></tr>`).join("") +
    `</table><p class="muted">ln = ln(measured / expected); shortfall: how far the on arm is below its expectation (the worse of ` +
    `throughput and TPOT), diagnosed beyond ${g.tolerance_ln}</p>`;
}

function loadFit(f) {
  const arm = (x) => `C1 ${fmt(x.c1_ms)} ms, C2 ${fmt(x.c2_ms_per_request, 3)} ms per request (R² ${fmt(x.r2, 3)})`;
  return `<p id="load-fit">Load fit (Kong et al., L = C1 / (1 − QPS·C2)): off ${arm(f.off)}; on ${arm(f.on)}; ` +
    `C1 on/off ${fmt(f.c1_ratio, 3)}, C2 on/off ${fmt(f.c2_ratio, 3)}; break-even ` +
    `${f.qps === null ? `none (${esc(f.why || "")})` : `at ${fmt(f.qps, 3)} requests/s`}</p>`;
}

// ------------------------------------------------------------------ the physics check

function physics(d) {
  if (!d.physics || !d.physics.length) return "";
  const b = d.physics_bounds || {}, wp = b.with_prefill;
  const from = d.lengths_from === "page" ? "the prompt and output tokens set under Load" : "the files' token counts";
  let s = `<h4>Physics check</h4><p class="muted" id="bounds">measured output tok/s against the speed of light (100% of peak ` +
    `bandwidth and FLOP/s, no overhead): <b>decode only</b>, ${esc(b.decode_only || "")}; <b>with the prefill share</b>, ` +
    (wp ? `${fmt(wp.prompt_len, 5)} prompt tokens prefilled per ${fmt(wp.output_len, 5)} output tokens (${from}); above it a point ` +
      `beats physics unless prefix caching is on`
      : `not checked: the files record no token counts; tick "prefill share" under Load and set the prompt and output tokens the sweep ran`) + "</p>";
  s += `<table id="physics"><tr><th>arm</th><th>${esc(d.load_axis)}</th><th>in flight</th><th>measured tok/s</th>` +
    `<th>decode-only bound</th><th>of it</th><th>bound with prefill</th><th>of it</th><th></th></tr>` +
    d.physics.map((c) => {
      const verdict = c.beats_physics ? "BEATS PHYSICS" : c.beats_physics_unless_prefix_caching ? "beats physics unless prefix caching is on" : "ok";
      return `<tr><td>${c.arm}</td><td>${fmt(c.level)}</td><td>${fmt(c.in_flight)}</td><td>${fmt(c.measured)}</td>` +
        `<td>${fmt(c.bound)}</td><td>${pct(c.fraction_of_bound)}</td><td>${fmt(c.bound_with_prefill)}</td>` +
        `<td>${pct(c.fraction_of_bound_with_prefill)}</td><td class="${verdict === "ok" ? "" : "beats"}">${verdict}</td></tr>`;
    }).join("") + "</table>";
  return s;
}

// ------------------------------------------------------------------ the fit

export function renderFit(d, m) {
  const box = document.getElementById("fit-out");
  if (!box) return;
  box.classList.remove("stale");
  const f = d.fit, c = d.curves, axis = c.axis;
  const params = Object.entries(f.parameters).map(([k, v]) => `${k} ${fmt(v.value, 4)} ± ${fmt(v.stderr, 2)}`);
  const held = Object.entries({ ...f.at_bound, ...f.fixed_at_default }).map(([k, v]) => `${k} ${fmt(v.value, 4)} (${v.reason})`);
  const mc = f.measured_crossover && f.measured_crossover.crossover;
  const iv = f.crossover_interval;
  let s = `<h4>Fit to these points (crossover calibrate, ${esc(d.model)}${d.lengths ? `, ${fmt(d.lengths.prompt_len, 5)} prompt / ` +
    `${fmt(d.lengths.output_len, 5)} output tokens` : ", pure decode"})</h4>`;
  s += `<p id="fit-summary" class="${f.reproduces ? "" : "beats"}">` + (f.reproduces
    ? `The calibrated model reproduces the sweep (every level within |ln| ${d.residual_limit}).`
    : `The model cannot reproduce this sweep: ${f.disagreements.length ? f.disagreements.map((x) =>
      `${x.quantity} at ${fmt(x.level)} (ln ${ln(x.ln)})`).join("; ") : "nothing in it identifies a parameter"}; ` +
      `its crossover is no calibration of this deployment.`) + "</p>";
  s += `<p>Fitted: ${esc(params.join(", ") || "nothing")}${held.length ? `; held: ${esc(held.join("; "))}` : ""}.</p>`;
  s += `<p id="fit-crossover">Crossover: measured ${mc === null || mc === undefined ? "none" : fmt(mc, 4)}, fitted ` +
    `${f.crossover === null ? `none up to ${fmt(f.crossover_searched_up_to)}` : fmt(f.crossover, 4)}` +
    (iv ? ` (90% bootstrap interval ${fmt(iv[0], 4)} – ${iv[1] === null ? "no crossover" : fmt(iv[1], 4)})` : "") +
    (f.crossover_never_cross_share ? `; in ${Math.round(100 * f.crossover_never_cross_share)}% of the resamples the fitted ` +
      `curves never cross up to ${fmt(f.crossover_searched_up_to)}` : "") +
    `; with the defaults ${c.default_crossover === null ? "none in this range" : fmt(c.default_crossover, 4)}.</p>`;
  if (d.yaml) s += `<div class="config"><h4>fit.yaml (crossover … --calibration fit.yaml) ${copy(d.yaml)}</h4></div>`;
  s += `<div class="charts"><div class="chart" id="chart-fit-tput"></div><div class="chart" id="chart-fit-speedup"></div></div>`;
  box.innerHTML = s;
  const xy = (key) => c.points.map((p) => [p.batch, p[key]]);
  const measuredAt = (arm) => (m.physics && m.physics.length
    ? m.physics.filter((r) => r.arm === arm).map((r) => [r.in_flight ?? r.level, r.measured])
    : m.points.map((p) => [p.level, p[`${arm}_output_throughput`]]));
  const tau = c.per_level_tau ? " (on at each level's tau)" : "";
  lineChart(document.getElementById("chart-fit-tput"), {
    title: `output tokens/s: the defaults and the fit${tau}`, xlabel: axis === "in_flight" ? "requests in flight" : axis,
    ylabel: "tokens/s", xlog: true, yzero: true,
    series: [
      { id: "fit-default-off", label: "defaults, off", color: COLORS.off, dash: "2 3", width: 1.5, points: xy("default_off") },
      { id: "fit-default-on", label: "defaults, on", color: COLORS.on, dash: "2 3", width: 1.5, points: xy("default_on") },
      { id: "fit-calibrated-off", label: "calibrated, off", color: COLORS.fitOff, dash: "6 3", points: xy("calibrated_off") },
      { id: "fit-calibrated-on", label: "calibrated, on", color: COLORS.fit, points: xy("calibrated_on") },
      { id: "fit-measured-off", label: "measured off", color: COLORS.measuredOff, markers: "square", noscale: true, points: measuredAt("off") },
      { id: "fit-measured-on", label: "measured on", color: COLORS.measuredOn, markers: "square", noscale: true, points: measuredAt("on") },
    ],
    vlines: [{ x: c.max_batch_on, label: `memory limit ${fmt(c.max_batch_on)}`, color: COLORS.memory, dash: "5 3" }],
  });
  const vlines = [
    { id: "fit-crossover-line", x: c.calibrated_crossover, label: `calibrated crossover ${fmt(c.calibrated_crossover, 4)}`, color: COLORS.fit },
    { x: c.default_crossover, label: `defaults ${fmt(c.default_crossover, 4)}`, color: COLORS.on, dash: "2 3" },
    // the measured crossover is a request rate on a rate sweep, whose fit is drawn against requests in flight
    { x: axis === m.load_axis ? mc ?? null : null, label: `measured ${fmt(mc, 4)}`, color: COLORS.cross, dash: "4 2" },
    { x: c.max_batch_on, label: `memory limit ${fmt(c.max_batch_on)}`, color: COLORS.memory, dash: "5 3" },
  ];
  const sp = axis === "in_flight" ? [] : m.points.map((p) => [p.level, p.speedup]);
  lineChart(document.getElementById("chart-fit-speedup"), {
    title: "speedup (on / off): the defaults and the fit", xlabel: axis === "in_flight" ? "requests in flight" : axis,
    ylabel: "speedup", xlog: true, legendAt: "bottom-left", hlines: [{ y: 1, color: "#888" }], vlines,
    series: [
      { id: "fit-default-speedup", label: "defaults", color: COLORS.on, dash: "2 3", width: 1.5, points: xy("default_speedup") },
      { id: "fit-calibrated-speedup", label: "calibrated", color: COLORS.fit, points: xy("calibrated_speedup") },
      ...(sp.length ? [{ id: "fit-measured-speedup", label: "measured", color: COLORS.measuredOn, markers: "diamond", noscale: true, points: sp }] : []),
    ],
  });
}
