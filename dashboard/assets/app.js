// The live sale page. Everything shown is set with textContent or as SVG
// attributes of numbers: no server string is ever parsed as HTML.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const SVG = "http://www.w3.org/2000/svg";
  let chosen = new URLSearchParams(location.search).get("voucher");
  const tokenInput = $("token");
  tokenInput.value = sessionStorage.getItem("flashsale-admin-token") || "";
  tokenInput.addEventListener("change", () => sessionStorage.setItem("flashsale-admin-token", tokenInput.value));

  async function getJSON(url) {
    const headers = {};
    if (tokenInput.value) headers.Authorization = "Bearer " + tokenInput.value;
    const res = await fetch(url, { headers, cache: "no-store" });
    const body = await res.json();
    if (!res.ok) throw new Error((body.error && body.error.message) || res.statusText);
    return body;
  }

  // listVouchers is the one place the list comes from. It stays on
  // /api/stats rather than GET /api/vouchers: that pages through every
  // voucher ever made, ended sales included, and counts each one's orders
  // in MySQL on every call, where /api/stats is the sampler's bounded list
  // of what is on sale, with both stocks, and costs no query per poll.
  async function listVouchers() {
    return (await getJSON("/api/stats")).vouchers;
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  const num = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US", { maximumFractionDigits: 1 }));

  function showList(vouchers) {
    const ul = $("vouchers");
    ul.replaceChildren();
    if (!vouchers.length) { ul.append(el("li", "empty", "No voucher on sale.")); return; }
    if (!chosen || !vouchers.some((v) => v.id === chosen)) chosen = vouchers[0].id;
    for (const v of vouchers) {
      const li = el("li", v.id === chosen ? "sel" : "");
      li.dataset.id = v.id;
      li.append(el("div", "t", v.title), el("div", "m", `#${v.id} · ${num(v.remaining_mysql)} of ${num(v.stock)} left`));
      li.addEventListener("click", () => { chosen = v.id; history.replaceState(null, "", "?voucher=" + encodeURIComponent(v.id)); tick(); });
      ul.append(li);
    }
  }

  function showVoucher(s) {
    const v = s.voucher;
    $("placeholder").hidden = true;
    $("view").hidden = false;
    $("title").textContent = v.title;
    $("window").textContent = `#${v.id} · stock ${num(v.stock)} · ${new Date(v.begin_time).toLocaleString()} → ${new Date(v.end_time).toLocaleString()}`;
    $("left-mysql").textContent = num(v.remaining_mysql);
    $("left-redis").textContent = num(v.remaining_redis);
    $("orders").textContent = num(v.orders);
    $("accepted").textContent = num(s.rates.accepted);
    const refused = Object.values(s.rates.refused).reduce((a, b) => a + b, 0);
    $("refused").textContent = num(refused);
    $("latency").textContent = s.latency_ms.requests ? `${num(s.latency_ms.p50)} · ${num(s.latency_ms.p99)}` : "–";
    const reasons = $("reasons");
    reasons.replaceChildren();
    const keys = Object.keys(s.rates.refused).filter((k) => s.rates.refused[k] > 0);
    if (!keys.length) reasons.append(el("li", "none", "none"));
    for (const k of keys) reasons.append(el("li", "", `${k}: ${num(s.rates.refused[k])}/s`));
    $("ops").hidden = !s.admin;
    if (s.admin) {
      $("backlog").textContent = num(v.backlog);
      $("dead").textContent = num(v.dead_letters);
      $("oversold").textContent = num(v.oversold);
      $("oversold").className = "value " + (v.oversold > 0 ? "bad" : "good");
      $("drift").textContent = `${num(v.mysql_drift)} · ${num(v.redis_drift)}`;
    }
    drawChart(s);
  }

  function svgEl(tag, attrs) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, val] of Object.entries(attrs)) e.setAttribute(k, String(val));
    return e;
  }

  // drawChart plots the stock left (lines, left axis) and the accepted
  // orders per second (bars, right axis) over the last minutes.
  function drawChart(s) {
    const W = 900, H = 240, L = 48, R = 44, T = 14, B = 26;
    const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img" });
    const now = Date.now() / 1000, span = 300, x = (t) => L + ((t - (now - span)) / span) * (W - L - R);
    const stock = Math.max(1, s.voucher.stock);
    const y = (v) => T + (1 - v / stock) * (H - T - B);
    const maxAcc = Math.max(1, ...s.seconds.map((p) => p.accepted));
    const yb = (v) => (v / maxAcc) * (H - T - B);
    for (let i = 0; i <= 4; i++) {
      const gy = T + (i / 4) * (H - T - B);
      svg.append(svgEl("line", { x1: L, x2: W - R, y1: gy, y2: gy, stroke: "#eef0f3" }));
      const lab = svgEl("text", { x: L - 6, y: gy + 4, "text-anchor": "end", "font-size": 11, fill: "#6b7280" });
      lab.textContent = num(Math.round(stock * (1 - i / 4)));
      svg.append(lab);
    }
    const bw = Math.max(1, (W - L - R) / span - 0.5);
    for (const p of s.seconds) {
      if (!p.accepted || p.t < now - span) continue;
      svg.append(svgEl("rect", { x: x(p.t), y: H - B - yb(p.accepted), width: bw, height: yb(p.accepted), fill: "#a7f3d0" }));
    }
    const accLab = svgEl("text", { x: W - R + 6, y: T + 10, "font-size": 11, fill: "#059669" });
    accLab.textContent = num(maxAcc) + "/s";
    svg.append(accLab);
    const line = (key, color) => {
      const pts = s.history.filter((p) => p[key] !== null && p[key] !== undefined && p.t >= now - span);
      if (!pts.length) return;
      const d = pts.map((p, i) => `${i ? "L" : "M"}${x(p.t).toFixed(1)},${y(p[key]).toFixed(1)}`).join(" ");
      svg.append(svgEl("path", { d, fill: "none", stroke: color, "stroke-width": 2.2, "stroke-linejoin": "round" }));
    };
    line("remaining_mysql", "#4f46e5");
    line("remaining_redis", "#e11d48");
    for (const m of [5, 4, 3, 2, 1, 0]) {
      const t = svgEl("text", { x: x(now - m * 60), y: H - 8, "text-anchor": "middle", "font-size": 11, fill: "#6b7280" });
      t.textContent = m ? `−${m} min` : "now";
      svg.append(t);
    }
    $("chart").replaceChildren(svg);
  }

  function status(ok, text) {
    $("dot").className = "dot " + (ok ? "ok" : "err");
    $("status").textContent = text;
  }

  async function tick() {
    try {
      showList(await listVouchers());
      if (chosen) showVoucher(await getJSON(`/api/vouchers/${encodeURIComponent(chosen)}/stats`));
      status(true, "live · " + new Date().toLocaleTimeString());
    } catch (e) {
      status(false, e.message);
    }
  }
  tick();
  setInterval(tick, 1000);
})();
