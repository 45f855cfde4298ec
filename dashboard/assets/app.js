// The live sale page. Everything shown is set with textContent or as SVG
// attributes of numbers: no server string is ever parsed as HTML.
import { drawChart } from "./chart.js";

const $ = (id) => document.getElementById(id);
// picked is the voucher the reader chose (by ?voucher=ID or a click), or
// null to follow the sale that sells now; chosen is the voucher shown.
let picked = new URLSearchParams(location.search).get("voucher");
let chosen = null;
const tokenInput = $("token");
tokenInput.value = sessionStorage.getItem("flashsale-admin-token") || "";
tokenInput.addEventListener("change", () => sessionStorage.setItem("flashsale-admin-token", tokenInput.value));

// STATUS labels the statuses the server gives a voucher.
const STATUS = { upcoming: "upcoming", on_sale: "on sale", sold_out: "sold out", ended: "ended" };

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
  return getJSON("/api/stats");
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
const num = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US", { maximumFractionDigits: 1 }));
// ms formats a latency: under a millisecond reads "< 1 ms", not 0.
const ms = (v) => (v < 1 ? "< 1 ms" : `${num(v)} ms`);
const badge = (status) => el("span", "badge " + (STATUS[status] ? status : ""), STATUS[status] || status);

// showList lists the vouchers and picks the one to show: the reader's, or
// else the one the server says is selling now (or most recently).
function showList(body) {
  const vouchers = body.vouchers, ul = $("vouchers");
  ul.replaceChildren();
  const listed = vouchers.some((v) => v.id === picked);
  chosen = listed ? picked : body.current;
  showFollow(listed);
  if (!vouchers.length) ul.append(el("li", "empty", "No voucher on sale."));
  for (const v of vouchers) {
    const li = el("li", v.id === chosen ? "sel" : "");
    li.dataset.id = v.id;
    li.dataset.status = v.status;
    const head = el("div", "h");
    head.append(el("span", "t", v.title), badge(v.status));
    li.append(head, el("div", "m", `#${v.id} · ${num(v.remaining_mysql)} of ${num(v.stock)} left`));
    li.addEventListener("click", () => {
      picked = v.id;
      history.replaceState(null, "", "?voucher=" + encodeURIComponent(v.id));
      tick();
    });
    ul.append(li);
  }
}

// showFollow says whether the page follows the sale or stays on the
// reader's voucher (listed: whether it is in the list), and how to do the
// other.
function showFollow(listed) {
  const p = $("follow");
  if (picked === null) {
    p.replaceChildren("Showing the sale selling now, or the last one. Click a voucher, or open ",
      el("code", "", "/dashboard?voucher=ID"), ", to stay on one.");
    return;
  }
  const a = el("a", "", "Follow the live sale");
  a.href = "/dashboard";
  if (listed) p.replaceChildren(`Staying on #${picked} (`, el("code", "", "?voucher=" + picked), "). ", a, ".");
  else p.replaceChildren(`#${picked} is not on sale now; showing the sale selling now. `, a, ".");
}

function showVoucher(s) {
  const v = s.voucher;
  $("title").textContent = v.title;
  $("status-badge").replaceChildren(badge(v.status));
  $("window").textContent = `#${v.id} · stock ${num(v.stock)} · ${new Date(v.begin_time).toLocaleString()} → ${new Date(v.end_time).toLocaleString()}`;
  $("left-mysql").textContent = num(v.remaining_mysql);
  $("left-redis").textContent = num(v.remaining_redis);
  $("orders").textContent = num(v.orders);
  // Only the states that apply: with no payment window an order is
  // final once created; pending is the async gate's.
  const pending = v.pending ?? v.backlog; // the admin's view names it backlog
  const applies = { window: v.payment_window_seconds > 0, async: pending !== undefined && pending !== null };
  for (const card of document.querySelectorAll("[data-state]")) card.hidden = !applies[card.dataset.state];
  $("pending").textContent = num(pending);
  $("paid").textContent = num(v.paid);
  $("awaiting").textContent = num(v.awaiting_payment);
  $("cancelled").textContent = num(v.cancelled);
  $("expired").textContent = num(v.expired);
  $("returned").textContent = num(v.returned);
  $("accepted").textContent = num(s.rates.accepted);
  $("accepted").className = "value" + (s.rates.accepted > 0 ? " good" : "");
  const refused = Object.values(s.rates.refused).reduce((a, b) => a + b, 0);
  $("refused").textContent = num(refused);
  $("refused").className = "value" + (refused > 0 ? " warn" : "");
  $("latency").textContent = s.latency_ms.requests ? `${ms(s.latency_ms.p50)} · ${ms(s.latency_ms.p99)}` : "–";
  const reasons = $("reasons");
  reasons.replaceChildren();
  const keys = Object.keys(s.rates.refused).filter((k) => s.rates.refused[k] > 0);
  if (!keys.length) reasons.append(el("li", "none", "none"));
  for (const k of keys) reasons.append(el("li", "", `${k}: ${num(s.rates.refused[k])}/s`));
  showQueue(s.queue);
  $("ops").hidden = !s.admin;
  if (s.admin) {
    $("backlog").textContent = num(v.backlog);
    $("dead").textContent = num(v.dead_letters);
    $("oversold").textContent = num(v.oversold);
    $("oversold").className = "value " + (v.oversold > 0 ? "bad" : "good");
    $("drift").textContent = `${num(v.mysql_drift)} · ${num(v.redis_drift)}`;
    $("returns-pending").textContent = num(v.returns_pending);
    $("paid-late").textContent = num(v.paid_after_close);
    $("paid-late").className = "value " + (v.paid_after_close > 0 ? "bad" : "good");
  }
  // The server's clock, not this browser's: the seconds end with the last
  // complete one.
  const now = s.seconds.length ? s.seconds[s.seconds.length - 1].t + 1 : Date.now() / 1000;
  drawChart($("chart"), s, now, num);
}

// showQueue shows a queue voucher's waiting room; an open voucher has none.
function showQueue(q) {
  $("queue").hidden = !q;
  if (!q) return;
  $("queue-waiting").textContent = num(q.waiting);
  $("queue-rate").textContent = `${num(q.admitted_per_second)} of ${num(q.admit_per_second)}`;
  $("queue-admitted").textContent = num(q.admitted);
  $("queue-units").textContent = `${num(q.units_ahead)} · ${num(q.passes_out)}`;
  const why = {passes_out: "none: only a pass expiring moves it", beyond_units: "none: only units coming back move it"};
  $("queue-eta").textContent = !q.waiting ? "–" : q.eta_seconds == null ? why[q.eta_reason] || "none" : num(q.eta_seconds);
}

function status(ok, text) {
  $("dot").className = "dot " + (ok ? "ok" : "err");
  $("status").textContent = text;
}

async function tick() {
  try {
    showList(await listVouchers());
    if (chosen) showVoucher(await getJSON(`/api/vouchers/${encodeURIComponent(chosen)}/stats`));
    $("placeholder").hidden = !!chosen;
    $("view").hidden = !chosen;
    status(true, "live · " + new Date().toLocaleTimeString());
  } catch (e) {
    status(false, e.message);
  }
}
tick();
setInterval(tick, 1000);
