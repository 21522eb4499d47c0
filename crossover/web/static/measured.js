// Measured result files dropped on the page: uploaded to the server (kept there, not in the link),
// read as one sweep by crossover.measured with the page's hardware, TP, method and k, every point
// checked against the speed of light, and overlaid on the predicted curves.

import { COLORS, esc, fmt } from "./chart.js";
import { api, query, render, showError } from "./app.js";

const uploads = []; // {id, name, arm}
let result = null;
let seq = 0;
const $ = (id) => document.getElementById(id);

async function upload(file) {
  const res = await api(`/api/upload?name=${encodeURIComponent(file.name)}`, {
    method: "POST", headers: { "X-Crossover": "1", "Content-Type": "application/octet-stream" }, body: file,
  });
  uploads.push({ id: res.id, name: res.name, arm: "auto" });
}

async function addFiles(files) {
  try {
    for (const f of files) await upload(f);
  } catch (e) {
    showError(e.message);
  }
  listUploads();
  refreshMeasured();
}

function listUploads() {
  $("uploads").innerHTML = uploads.map((u, i) => `<li><span title="${esc(u.name)}">${esc(u.name)}</span>` +
    `<select data-i="${i}" class="arm">${["auto", "on", "off"].map((a) => `<option${a === u.arm ? " selected" : ""}>${a}</option>`).join("")}</select>` +
    `<button type="button" data-i="${i}" class="remove" title="remove">×</button></li>`).join("");
}

export async function refreshMeasured() {
  const mine = ++seq;
  if (!uploads.length) {
    result = null;
    $("measured-out").innerHTML = "";
    render();
    return;
  }
  const files = uploads.map((u) => `${u.id}:${u.arm}`).join(",");
  try {
    const d = await api(`/api/measured?${query({ files })}`);
    if (mine !== seq) return;
    result = d;
  } catch (e) {
    if (mine !== seq) return;
    result = null;
    $("measured-out").innerHTML = `<p class="beats">measured files: ${esc(e.message)}</p>`;
    render();
    return;
  }
  renderTable();
  render();
}

// Series for the charts: the measured points at their load (requests in flight) and the measured
// speedup; points beyond the speed of light drawn red.
export function measuredOverlay() {
  const out = { throughput: [], speedup: [] };
  if (!result) return out;
  const rows = result.physics && result.physics.length ? result.physics : result.points.flatMap((p) => [
    { arm: "off", level: p.level, in_flight: p.level, measured: p.off_output_throughput },
    { arm: "on", level: p.level, in_flight: p.level, measured: p.on_output_throughput }]);
  for (const arm of ["off", "on"]) {
    const r = rows.filter((x) => x.arm === arm);
    const color = arm === "on" ? COLORS.measuredOn : COLORS.measuredOff;
    out.throughput.push({
      id: `measured-${arm}`, label: `measured ${arm}`, color, markers: "square", noscale: true, points: r.map((x) => [x.in_flight ?? x.level, x.measured]),
      fills: r.map((x) => (x.beats_physics ? COLORS.bad : color)), strokes: r.map((x) => (x.beats_physics ? COLORS.bad : color)),
      tips: r.map((x) => `measured ${arm} at ${result.load_axis} ${fmt(x.level)}: ${fmt(x.measured)} tok/s` +
        (x.bound ? `; speed-of-light bound ${fmt(x.bound)} (${fmt(x.fraction_of_bound)}×)${x.beats_physics ? " BEATS PHYSICS" : ""}` : "")),
    });
  }
  out.speedup.push({ id: "measured-speedup", label: "measured", color: COLORS.measuredOn, markers: "diamond", noscale: true,
    points: result.points.map((p) => [p.level, p.speedup]), tips: result.points.map((p) => `measured speedup ${fmt(p.speedup)} at ${fmt(p.level)}`) });
  return out;
}

function renderTable() {
  const d = result;
  const cross = d.crossover !== null ? `${d.load_axis} ${fmt(d.crossover, 4)}` : `not reached (${d.side || "none"} side)`;
  let s = `<h3>Measured: ${d.points.length} level(s) on the ${esc(d.load_axis)} axis` +
    (d.model ? `, checked as ${esc(d.model)}` : "") + `; measured crossover ${cross}` +
    (d.predicted_crossover !== null && d.predicted_crossover !== undefined ? `, predicted ${fmt(d.predicted_crossover, 4)}` : "") + "</h3>";
  if (d.crossover_on_impossible_point) s += `<p class="beats">the measured crossover rests on a point faster than physics allows</p>`;
  if (d.physics && d.physics.length) {
    s += `<table id="physics"><tr><th>arm</th><th>${esc(d.load_axis)}</th><th>measured tok/s</th><th>speed-of-light bound</th>` +
      `<th>fraction</th><th></th></tr>` + d.physics.map((c) => `<tr><td>${c.arm}</td><td>${fmt(c.level)}</td><td>${fmt(c.measured)}</td>` +
      `<td>${fmt(c.bound)}</td><td>${fmt(c.fraction_of_bound)}</td><td class="${c.beats_physics ? "beats" : ""}">` +
      `${c.beats_physics ? "BEATS PHYSICS" : "ok"}</td></tr>`).join("") + "</table>";
  }
  for (const n of [...(d.notes || []), ...(d.warnings || [])]) s += `<p class="muted">${esc(n)}</p>`;
  $("measured-out").innerHTML = s;
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
    refreshMeasured();
  });
  $("uploads").addEventListener("click", (e) => {
    if (!e.target.classList.contains("remove")) return;
    uploads.splice(Number(e.target.dataset.i), 1);
    listUploads();
    refreshMeasured();
  });
}
