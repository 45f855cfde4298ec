// The sale's chart: stock left (lines, left axis) and accepted orders per
// second (bars, right axis) over the sale's window. It is built of SVG
// elements with numeric attributes; text goes in as textContent only.
const SVG = "http://www.w3.org/2000/svg";
const W = 900, H = 240, L = 48, R = 52, T = 22, B = 26;
// MAX_SPAN is the widest window shown, in seconds: the server keeps 299
// seconds of per-second counts.
const MAX_SPAN = 300;

// niceStep returns the smallest whole step of 1, 2 or 5 × 10^n that cuts
// 0..max into at most parts parts.
export function niceStep(max, parts) {
  const raw = Math.max(max / parts, 1);
  const p = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw);
}

// niceTicks returns the ticks of an axis from 0 that reaches max: 0 and
// multiples of a nice step, the last at or above max.
export function niceTicks(max, parts) {
  const step = niceStep(max, parts), top = Math.max(step, Math.ceil(max / step) * step), out = [];
  for (let v = 0; v <= top; v += step) out.push(v);
  return out;
}

// saleSpan returns the window [from, to] (Unix seconds) that fits the sale
// [begin, end): the whole sale with a little margin when it fits in
// MAX_SPAN, else the last MAX_SPAN seconds of it up to now.
export function saleSpan(begin, end, now) {
  const pad = Math.min(Math.max(2, (end - begin) / 20), 15);
  const span = Math.min(end - begin + 2 * pad, MAX_SPAN);
  const to = Math.min(Math.max(now, begin - pad + span), end + pad);
  return [to - span, to];
}

// timeStep returns the step of the time axis, in seconds: at most 8 ticks.
function timeStep(span) {
  return [1, 2, 5, 10, 15, 30, 60, 120, 300].find((s) => span / s <= 8) || 600;
}

// clock formats Unix seconds t as local HH:MM, or HH:MM:SS with seconds.
function clock(t, seconds) {
  const d = new Date(t * 1000), two = (n) => String(n).padStart(2, "0");
  return `${two(d.getHours())}:${two(d.getMinutes())}` + (seconds ? `:${two(d.getSeconds())}` : "");
}

function svgEl(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, val] of Object.entries(attrs)) e.setAttribute(k, String(val));
  if (text !== undefined) e.textContent = text;
  return e;
}

// drawChart draws the voucher's figures s (the stats endpoint's body) into
// box, with now the server's time in Unix seconds and num the page's
// number format.
export function drawChart(box, s, now, num) {
  const begin = Date.parse(s.voucher.begin_time) / 1000, end = Date.parse(s.voucher.end_time) / 1000;
  const [from, to] = saleSpan(begin, end, now);
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img" });
  const x = (t) => L + ((t - from) / (to - from)) * (W - L - R);
  const ticks = niceTicks(s.voucher.stock, 4), top = ticks[ticks.length - 1];
  const y = (v) => T + (1 - v / top) * (H - T - B);
  for (const v of ticks) {
    svg.append(svgEl("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: "#eef0f3" }));
    svg.append(svgEl("text", { class: "ytick", x: L - 6, y: y(v) + 4, "text-anchor": "end", "font-size": 11, fill: "#6b7280" }, num(v)));
  }
  // Each axis says what it measures: units left on the left, accepted
  // orders per second on the right.
  svg.append(svgEl("text", { class: "ytitle", x: 4, y: T - 6, "font-size": 10, fill: "#4f46e5" }, "units left"));
  svg.append(svgEl("text", { class: "acctitle", x: W - 4, y: T - 6, "text-anchor": "end", "font-size": 10, fill: "#059669" }, "accepted / s"));
  const step = timeStep(to - from);
  for (let t = Math.ceil(from / step) * step; t <= to; t += step) {
    svg.append(svgEl("text", { class: "xtick", x: x(t), y: H - 8, "text-anchor": "middle", "font-size": 11, fill: "#6b7280" }, clock(t, step < 60)));
  }
  drawBars(svg, s.seconds.filter((p) => p.accepted && p.t >= from && p.t < to), x, to - from);
  for (const [t, label] of [[begin, "begin"], [end, "end"], [now, "now"]]) {
    if (t < from || t > to || (label === "now" && (now >= end || now < begin))) continue;
    svg.append(svgEl("line", { x1: x(t), x2: x(t), y1: T - 4, y2: H - B, stroke: "#9ca3af", "stroke-dasharray": "3 3" }));
    svg.append(svgEl("text", { x: x(t) + 3, y: T - 6, "font-size": 10, fill: "#6b7280" }, label));
  }
  // MySQL's line is wide and pale under Redis's thin dashed one, so both
  // show where they agree.
  const line = (key, attrs) => {
    const pts = s.history.filter((p) => p[key] !== null && p[key] !== undefined && p.t >= from && p.t <= to);
    if (!pts.length) return;
    const d = pts.map((p, i) => `${i ? "L" : "M"}${x(p.t).toFixed(1)},${y(p[key]).toFixed(1)}`).join(" ");
    svg.append(svgEl("path", { class: "stock " + key, d, fill: "none", "stroke-linejoin": "round", ...attrs }));
  };
  line("remaining_mysql", { stroke: "#4f46e5", "stroke-width": 6, "stroke-opacity": 0.4 });
  line("remaining_redis", { stroke: "#e11d48", "stroke-width": 2, "stroke-dasharray": "7 4" });
  if (now < begin) {
    svg.append(svgEl("text", { x: W / 2, y: H / 2, "text-anchor": "middle", "font-size": 14, fill: "#6b7280" }, `The sale begins at ${clock(begin, true)}.`));
  }
  box.replaceChildren(svg);
}

// drawBars draws the accepted orders per second, with their axis on the
// right, scaled to a nice top and ticked at each of its steps.
function drawBars(svg, seconds, x, span) {
  const ticks = niceTicks(Math.max(1, ...seconds.map((p) => p.accepted)), 4), top = ticks.at(-1);
  const h = (v) => (v / top) * (H - T - B);
  const bw = Math.max(1, (W - L - R) / span - 1);
  for (const p of seconds) {
    svg.append(svgEl("rect", { x: x(p.t), y: H - B - h(p.accepted), width: bw, height: h(p.accepted), fill: "#a7f3d0" }));
  }
  for (const v of ticks) {
    svg.append(svgEl("line", { x1: W - R, x2: W - R + 4, y1: H - B - h(v), y2: H - B - h(v), stroke: "#059669" }));
    svg.append(svgEl("text", { class: "acctick", x: W - R + 6, y: H - B - h(v) + 4, "font-size": 11, fill: "#059669" }, `${v}/s`));
  }
}
