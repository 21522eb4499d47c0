// The serving-simulation tab: start a sweep (crossover.simulate) as a server job, poll its progress,
// draw output throughput and p50/p99 latency against concurrency, speculation off and on.

import { COLORS, esc, fmt, lineChart } from "./chart.js";
import { api, query, showError, state, writeHash } from "./app.js";

const $ = (id) => document.getElementById(id);
let result = null;
const POLL_MS = 300;

// Run the sweep of the page's state; a link with tab=sim (or sim=1, set once one has run) runs it on load.
export async function runSim() {
  $("sim-run").disabled = true;
  $("sim-progress").value = 0;
  $("sim-status").textContent = "starting…";
  try {
    let job = await api(`/api/simulate?${query()}`, { method: "POST", headers: { "X-Crossover": "1" } });
    while (job.state === "running") {
      $("sim-progress").max = job.total || 1;
      $("sim-progress").value = job.done;
      $("sim-status").textContent = `${job.done} of ${job.total} levels` + (job.load !== null ? ` (last: concurrency ${fmt(job.load)})` : "") +
        `, ${job.seconds.toFixed(1)} s`;
      await new Promise((r) => setTimeout(r, POLL_MS));
      job = await api(`/api/job?id=${job.id}`);
    }
    if (job.state === "failed") throw new Error(job.error);
    $("sim-progress").value = $("sim-progress").max;
    $("sim-status").textContent = `done in ${job.seconds.toFixed(1)} s`;
    document.body.dataset.sim = "done";
    result = job.result;
    state.sim = 1;
    writeHash();
    showError("");
    renderSim();
  } catch (e) {
    $("sim-status").textContent = "failed";
    showError(e.message);
  } finally {
    $("sim-run").disabled = false;
  }
}

export function renderSim() {
  if (!result) return;
  const lv = result.levels, axis = result.load_axis;
  const x = (l) => l[axis];
  const c = result[`crossover_${axis}`];
  const inp = result.inputs;
  $("sim-summary").innerHTML = `<span class="big">${c === null ? "no crossover" : `crossover: ${axis} ${fmt(c, 4)}`}</span> ` +
    (c === null ? `(speculation ${result.crossover_side === "on" ? "faster" : result.crossover_side === "off" ? "slower" : "equal"} at every level)` : "") +
    `<br><span class="muted">${esc(inp.model)} on ${inp.tp} × ${esc(inp.hardware)}, workload ${esc(inp.workload)}, ` +
    `${esc(inp.method)} k = ${inp.k}, ${inp.num_prompts} requests per level (at least), seed ${inp.seed}</span>`;
  const vl = c === null ? [] : [{ x: c, label: `crossover ${fmt(c, 4)}`, color: COLORS.cross }];
  lineChart($("chart-sim-tput"), {
    title: "output tokens/s vs load", xlabel: axis, ylabel: "output tokens/s", xlog: true, yzero: true, vlines: vl,
    series: ["off", "on"].map((arm) => ({ id: `sim-${arm}`, label: `speculation ${arm}`, color: arm === "on" ? COLORS.on : COLORS.off,
      dash: arm === "on" ? "" : "6 3", points: lv.map((l) => [x(l), l[arm].output_throughput]) })),
  });
  const m = state.latency;
  const series = [];
  for (const arm of ["off", "on"]) {
    for (const [stat, dash] of [["median", ""], ["p99", "2 3"]]) {
      series.push({ id: `sim-${stat}-${arm}`, label: `${stat === "median" ? "p50" : "p99"} ${arm}`, dash,
        color: arm === "on" ? COLORS.on : COLORS.off, points: lv.map((l) => [x(l), l[arm][`${stat}_${m}_ms`]]) });
    }
  }
  lineChart($("chart-sim-lat"), { title: `${m.toUpperCase()} (ms) vs load`, xlabel: axis, ylabel: "ms", xlog: true, yzero: true, series, vlines: vl });
}

export function initSim() {
  $("sim-run").addEventListener("click", runSim);
}
