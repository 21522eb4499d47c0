// Small SVG charts for the what-if page: lines and markers over linear or log axes, vertical and
// horizontal marks, stacked horizontal bars. No dependency; the numbers come from the server.

const NS = "http://www.w3.org/2000/svg";
export const COLORS = {
  off: "#444", on: "#1f6fd1", cross: "#d1261f", memory: "#8a6d00", measuredOff: "#222",
  measuredOn: "#0a8f5a", bad: "#d1261f", grid: "#e4e4e4", fit: "#b5179e", fitOff: "#6a1b9a",
};
const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
  "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd"];

export function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

export function fmt(v, digits = 3) {
  if (v === null || v === undefined || !isFinite(v)) return "–";
  const a = Math.abs(v);
  if (a >= 1e6) return (v / 1e6).toPrecision(digits) + "M";
  if (a >= 1e4) return (v / 1e3).toPrecision(digits) + "k";
  if (a >= 100) return Math.round(v).toString();
  return Number(v.toPrecision(digits)).toString();
}

function scale(lo, hi, a, b, log) {
  const f = log ? Math.log : (x) => x;
  const l = f(lo), h = f(hi);
  const k = h === l ? 0 : (b - a) / (h - l);
  return (x) => a + (f(Math.max(x, log ? 1e-300 : -Infinity)) - l) * k;
}

function ticks(lo, hi, log) {
  if (log) {
    const out = [];
    const base = hi / lo > 1e3 ? 10 : 2;
    for (let e = Math.floor(Math.log(lo) / Math.log(base)); Math.pow(base, e) <= hi * 1.0001; e++) {
      const t = Math.pow(base, e);
      if (t >= lo * 0.9999) out.push(t);
    }
    return out.length >= 2 ? out : [lo, hi];
  }
  const span = hi - lo || 1;
  const step0 = Math.pow(10, Math.floor(Math.log10(span / 5)));
  const step = [1, 2, 5, 10].map((m) => m * step0).find((s) => span / s <= 6);
  const out = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push(Number(t.toPrecision(12)));
  return out;
}

function extent(values, log, pad) {
  let lo = Math.min(...values), hi = Math.max(...values);
  if (!isFinite(lo) || !isFinite(hi)) return [log ? 1 : 0, 1];
  if (log) return [lo, hi > lo ? hi : lo * 2];
  if (pad) { const p = (hi - lo || Math.abs(hi) || 1) * 0.06; lo -= p; hi += p; }
  return [lo, hi > lo ? hi : lo + 1];
}

// opts: {title, xlabel, ylabel, xlog, ylog, yzero, series: [{id, label, color, dash, width, points: [[x, y]],
//   markers: "none"|"square"|"circle"|"diamond", hollow, tips: [..]}], vlines: [{x, label, color, dash}],
//   hlines: [{y, label, color, dash}], width, height}
export function lineChart(el, opts) {
  const W = opts.width || 620, H = opts.height || 300, m = { l: 62, r: 16, t: 26, b: 42 };
  const good = (p) => isFinite(p[0]) && isFinite(p[1]) && (!opts.ylog || p[1] > 0);
  const pts = opts.series.flatMap((s) => s.points.filter(good));
  const xs = pts.map((p) => p[0]).concat(opts.xdomain || []);
  // series marked `noscale` (measured points) widen the y axis only up to 1.5x the others: a wild
  // outlier is pinned to the top edge (a triangle) instead of flattening the curves
  const core = opts.series.filter((s) => !s.noscale).flatMap((s) => s.points.filter(good).map((p) => p[1]));
  const cap = core.length ? Math.max(...core) * 1.5 : Infinity;
  const extra = opts.series.filter((s) => s.noscale).flatMap((s) => s.points.filter(good).map((p) => Math.min(p[1], cap)));
  const ys = core.concat(extra).concat((opts.hlines || []).map((h) => h.y)).concat(opts.yzero ? [0] : []);
  const [x0, x1] = opts.xdomain || extent(xs, opts.xlog, false);
  const [y0, y1] = extent(ys, opts.ylog, true);
  const X = scale(x0, x1, m.l, W - m.r, opts.xlog), Y = scale(y0, y1, H - m.b, m.t, opts.ylog);
  const inX = (x) => x >= x0 * (1 - 1e-9) && x <= x1 * (1 + 1e-9);
  let s = `<svg xmlns="${NS}" viewBox="0 0 ${W} ${H}" width="100%" role="img" aria-label="${esc(opts.title || "")}">`;
  s += `<text x="${m.l}" y="16" class="ctitle">${esc(opts.title || "")}</text>`;
  for (const t of ticks(x0, x1, opts.xlog)) {
    const x = X(t).toFixed(1);
    s += `<line x1="${x}" x2="${x}" y1="${m.t}" y2="${H - m.b}" stroke="${COLORS.grid}"/>`;
    s += `<text x="${x}" y="${H - m.b + 14}" text-anchor="middle" class="tick">${fmt(t)}</text>`;
  }
  for (const t of ticks(y0, y1, opts.ylog)) {
    const y = Y(t).toFixed(1);
    s += `<line x1="${m.l}" x2="${W - m.r}" y1="${y}" y2="${y}" stroke="${COLORS.grid}"/>`;
    s += `<text x="${m.l - 6}" y="${y}" dy="0.32em" text-anchor="end" class="tick">${fmt(t)}</text>`;
  }
  s += `<rect x="${m.l}" y="${m.t}" width="${W - m.l - m.r}" height="${H - m.t - m.b}" fill="none" stroke="#999"/>`;
  s += `<text x="${(m.l + W - m.r) / 2}" y="${H - 6}" text-anchor="middle" class="axis">${esc(opts.xlabel || "")}</text>`;
  s += `<text transform="translate(14 ${(m.t + H - m.b) / 2}) rotate(-90)" text-anchor="middle" class="axis">${esc(opts.ylabel || "")}</text>`;
  for (const h of opts.hlines || []) {
    const y = Y(h.y).toFixed(1);
    s += `<line x1="${m.l}" x2="${W - m.r}" y1="${y}" y2="${y}" stroke="${h.color || "#888"}" stroke-dasharray="${h.dash || "4 3"}"/>`;
  }
  for (const v of (opts.vlines || []).filter((v) => v.x !== null && v.x !== undefined && isFinite(v.x) && inX(v.x))) {
    const x = X(v.x);
    s += `<line ${v.id ? `id="${v.id}" ` : ""}x1="${x.toFixed(1)}" x2="${x.toFixed(1)}" y1="${m.t}" y2="${H - m.b}" stroke="${v.color}" stroke-width="1.5" stroke-dasharray="${v.dash || ""}"/>`;
    if (v.label) s += `<text x="${x.toFixed(1)}" y="${m.t + 12}" data-x="${x.toFixed(1)}" class="vlabel" fill="${v.color}">${esc(v.label)}</text>`;
  }
  s += `<g clip-path="none">`;
  opts.series.forEach((se) => {
    const ok = se.points.filter((p) => isFinite(p[0]) && isFinite(p[1]) && (!opts.ylog || p[1] > 0) && inX(p[0]));
    if (se.markers && se.markers !== "none") {
      ok.forEach((p, i) => {
        const over = p[1] > y1, x = X(p[0]), y = Y(Math.min(p[1], y1)), r = se.size || 4.5;
        const fill = se.hollow ? "#fff" : (se.fills ? se.fills[i] : se.color);
        const stroke = se.strokes ? se.strokes[i] : se.color;
        const tip = se.tips ? `<title>${esc(se.tips[i])}</title>` : "";
        const cls = `marker ${se.id || ""}`;
        if (over) s += `<path class="${cls} pinned" d="M${x.toFixed(1)} ${(y - 2).toFixed(1)}l${r + 1} ${2 * r + 2}h${-2 * r - 2}z" fill="${fill}" stroke="${stroke}" stroke-width="1.5">${tip}</path>`;
        else if (se.markers === "square") s += `<rect class="${cls}" x="${(x - r).toFixed(1)}" y="${(y - r).toFixed(1)}" width="${2 * r}" height="${2 * r}" fill="${fill}" stroke="${stroke}" stroke-width="1.5">${tip}</rect>`;
        else if (se.markers === "diamond") s += `<path class="${cls}" d="M${x.toFixed(1)} ${(y - r - 1).toFixed(1)}l${r + 1} ${r + 1}l${-r - 1} ${r + 1}l${-r - 1} ${-r - 1}z" fill="${fill}" stroke="${stroke}" stroke-width="1.5">${tip}</path>`;
        else s += `<circle class="${cls}" cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="${r}" fill="${fill}" stroke="${stroke}" stroke-width="1.5">${tip}</circle>`;
      });
    } else if (ok.length) {
      const d = ok.map((p, i) => `${i ? "L" : "M"}${X(p[0]).toFixed(2)} ${Y(p[1]).toFixed(2)}`).join("");
      s += `<path ${se.id ? `id="${se.id}" ` : ""}d="${d}" fill="none" stroke="${se.color}" stroke-width="${se.width || 2}" stroke-dasharray="${se.dash || ""}"/>`;
    }
  });
  s += `</g>`;
  const legend = opts.series.filter((se) => se.label);
  let lx = m.l + 8, ly = m.t + 14;
  if (opts.legendAt === "bottom-left") ly = H - m.b - 10 - (legend.length - 1) * 15;
  s += `<g class="legend-box"><rect class="legend-bg" x="${lx - 5}" y="${ly - 8}" width="0" height="${legend.length * 15 + 1}" fill="#fff" fill-opacity="0.85"/>`;
  legend.forEach((se, i) => {
    const y = ly + i * 15;
    s += se.markers && se.markers !== "none"
      ? `<rect x="${lx}" y="${y - 4}" width="8" height="8" fill="${se.hollow ? "#fff" : se.color}" stroke="${se.color}"/>`
      : `<line x1="${lx - 2}" x2="${lx + 14}" y1="${y}" y2="${y}" stroke="${se.color}" stroke-width="2" stroke-dasharray="${se.dash || ""}"/>`;
    s += `<text x="${lx + 19}" y="${y}" dy="0.32em" class="legend">${esc(se.label)}</text>`;
  });
  el.innerHTML = s + "</g></svg>";
  layoutLabels(el.querySelector("svg"), { left: m.l, right: W - m.r, top: m.t, bottom: H - m.b });
}

// The vertical marks' labels, placed once drawn (their widths are the browser's): beside the line,
// on its right unless that runs past the plot, in the first row down that overlaps no label placed
// before it nor the legend, so a crossover and a memory limit close together never overprint.
const ROW_PX = 13;

function overlaps(a, b, pad = 1) {
  return a.x < b.x + b.width + pad && b.x < a.x + a.width + pad && a.y < b.y + b.height + pad && b.y < a.y + a.height + pad;
}

function layoutLabels(svg, plot) {
  // a chart in a hidden tab has no boxes: it is drawn again when its tab is shown
  if (!svg || typeof svg.getBBox !== "function" || !svg.getBoundingClientRect().width) return;
  const bg = svg.querySelector(".legend-bg"), texts = [...svg.querySelectorAll(".legend-box text")];
  const taken = [];
  try {
    if (bg && texts.length) {
      const right = Math.max(...texts.map((t) => { const b = t.getBBox(); return b.x + b.width; }));
      bg.setAttribute("width", String(Math.max(0, right - Number(bg.getAttribute("x")) + 4)));
      taken.push(bg.getBBox());
    } else if (bg) bg.remove();
    for (const t of svg.querySelectorAll("text.vlabel")) {
      const x = Number(t.dataset.x), y0 = plot.top + 12;
      let placed = false;
      for (let row = 0; !placed && y0 + row * ROW_PX <= plot.bottom - 2; row++) {
        for (const side of ["start", "end"]) {
          t.setAttribute("text-anchor", side);
          t.setAttribute("x", String(side === "start" ? x + 4 : x - 4));
          t.setAttribute("y", String(y0 + row * ROW_PX));
          const b = t.getBBox();
          if (b.x < plot.left + 1 || b.x + b.width > plot.right - 1) continue;
          if (!taken.some((o) => overlaps(o, b))) { placed = true; break; }
        }
      }
      if (placed) taken.push(t.getBBox());
      else t.remove(); // no room anywhere: the line stays unlabelled rather than overprinted
    }
  } catch (e) {
    // no layout without a rendered chart: it is laid out when drawn again
  }
}

// rows: [{label, parts: {name: value}}]; one stacked horizontal bar per row, a shared legend.
export function stackedBars(el, rows, opts = {}) {
  const names = [];
  rows.forEach((r) => Object.keys(r.parts).forEach((n) => { if (!names.includes(n)) names.push(n); }));
  const W = opts.width || 620, barH = 26, m = { l: 70, r: 60, t: 26 };
  const legendRows = Math.ceil(names.length / 4);
  const H = m.t + rows.length * (barH + 12) + 20 + legendRows * 16;
  const total = Math.max(...rows.map((r) => Object.values(r.parts).reduce((a, b) => a + b, 0)), 1e-9);
  const X = (v) => (v / total) * (W - m.l - m.r);
  let s = `<svg xmlns="${NS}" viewBox="0 0 ${W} ${H}" width="100%" role="img" aria-label="${esc(opts.title || "")}">`;
  s += `<text x="${m.l}" y="16" class="ctitle">${esc(opts.title || "")}</text>`;
  rows.forEach((r, i) => {
    const y = m.t + i * (barH + 12);
    let x = m.l, sum = 0;
    s += `<text x="${m.l - 6}" y="${y + barH / 2}" dy="0.32em" text-anchor="end" class="legend">${esc(r.label)}</text>`;
    names.forEach((n, j) => {
      const v = r.parts[n] || 0;
      if (v <= 0) return;
      sum += v;
      s += `<rect x="${x.toFixed(2)}" y="${y}" width="${X(v).toFixed(2)}" height="${barH}" fill="${PALETTE[j % PALETTE.length]}"><title>${esc(`${r.label}: ${n} ${v.toFixed(3)} ms${opts.tips && opts.tips[n] ? ` (${opts.tips[n]})` : ""}`)}</title></rect>`;
      x += X(v);
    });
    s += `<text x="${(x + 4).toFixed(1)}" y="${y + barH / 2}" dy="0.32em" class="legend">${sum.toFixed(2)} ms</text>`;
  });
  const ly = m.t + rows.length * (barH + 12) + 8;
  names.forEach((n, j) => {
    const x = m.l + (j % 4) * ((W - m.l) / 4), y = ly + Math.floor(j / 4) * 16;
    s += `<rect x="${x}" y="${y}" width="10" height="10" fill="${PALETTE[j % PALETTE.length]}"/>`;
    s += `<text x="${x + 14}" y="${y + 5}" dy="0.32em" class="legend">${esc(n)}</text>`;
  });
  el.innerHTML = s + "</svg>";
}
