// The Quire admin page: polls the gateway's Admin API every POLL_MS (<= 2 s staleness),
// browses ledgers and logs, and sends the operator's actions after a confirmation.
// The token (when the gateway asks for one) lives in this tab's session storage only.
"use strict";

const POLL_MS = 1000;
const PAGE = 20;
const TOKEN_KEY = "quire-admin-token";
const LOG_LEDGERS_SHOWN = 50;

const $ = (id) => document.getElementById(id);
const state = { adds: new Map(), ledgerPages: [null], logAfter: null, logNext: null,
  detail: null, polling: false, needToken: false, actionError: "" };

class NeedToken extends Error {}
// A 403: the gateway knows the token, but its scope does not allow the call (a read
// token shows the cluster and cannot act; docs/api.md "Scoped tokens").
class Refused extends Error {}

async function api(method, path) {
  const headers = { Accept: "application/json" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = "Bearer " + token;
  let response;
  try {
    response = await fetch(path, { method, headers, cache: "no-store" });
  } catch (err) {
    throw new Error("the gateway did not answer (" + err.message + ")");
  }
  if (response.status === 401) {
    sessionStorage.removeItem(TOKEN_KEY);
    state.needToken = true;
    throw new NeedToken();
  }
  const body = response.status === 204 ? null : await response.json();
  if (response.status === 403) {
    throw new Refused(`Refused (403 forbidden): ${body && body.message ? body.message : "this token may not do this"}`);
  }
  if (!response.ok) {
    throw new Error(`${body && body.error ? body.error : response.status}: ${body && body.message ? body.message : ""}`);
  }
  return body;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child instanceof Node ? child : String(child));
  return node;
}

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

function showError(message) {
  const banner = $("error");
  banner.textContent = message;
  banner.hidden = !message;
}

function askToken() {
  state.needToken = true;
  $("main").hidden = true;
  $("token-form").hidden = false;
  $("status").textContent = "Waiting for a token";
  $("token").focus();
}

function confirmAction(text) {
  const dialog = $("confirm");
  $("confirm-text").textContent = text;
  dialog.returnValue = "";  // Escape closes without one: never a stale "ok"
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
    $("confirm-cancel").focus();
  });
}

async function act(text, method, path) {
  if (!(await confirmAction(text))) return;
  try {
    await api(method, path);
    state.actionError = "";
  } catch (err) {
    if (err instanceof NeedToken) return askToken();
    // Kept in the banner across polls (a refusal must not flash by) until the next action.
    state.actionError = err.message;
  }
  showError(state.actionError);
  await poll();
}

// ---------------------------------------------------------------- the live part

function renderCluster(cluster) {
  $("auditor").textContent = cluster.auditor_elected ? `elected: ${cluster.auditor_id}` : "none elected";
  $("replication").textContent = cluster.replication_enabled ? "enabled" : "disabled";
  $("replication-enable").disabled = cluster.replication_enabled;
  $("replication-disable").disabled = !cluster.replication_enabled;
  const b = cluster.bookies;
  $("bookie-counts").textContent = `${b.writable} / ${b.readonly} / ${b.unavailable}`;
  $("under-count").textContent = String(cluster.under_replicated_ledgers);
  $("racks").textContent = Object.entries(cluster.racks).map(([rack, n]) => `${rack} (${n})`).join(", ") || "–";
  // The auditor's last complete check (null before its first); GET /v1/admin/placement lists them.
  $("placement-count").textContent = cluster.placement_violations === null ? "–" : String(cluster.placement_violations);
}

function addsPerSecond(bookie, now) {
  const count = bookie.entries_added;
  if (count === null || count === undefined) { state.adds.delete(bookie.id); return "–"; }
  const before = state.adds.get(bookie.id);
  state.adds.set(bookie.id, { count, at: now, rate: before ? before.rate : null });
  if (!before || now <= before.at) return before && before.rate !== null ? before.rate.toFixed(0) : "–";
  const rate = Math.max(0, (count - before.count) / ((now - before.at) / 1000));
  state.adds.get(bookie.id).rate = rate;
  return rate.toFixed(0);
}

function renderBookies(bookies) {
  const now = performance.now();
  const rows = bookies.map((b) => {
    const leaving = b.state === "decommissioning" || b.state === "decommissioned";
    const button = el("button", { type: "button", "aria-label": `Decommission ${b.id}`,
      onclick: () => act(`Decommission bookie ${b.id}? Everything it stores is re-replicated and no new ledger will use it.`,
        "POST", `/v1/admin/bookies/${encodeURIComponent(b.id)}/decommission`) }, "Decommission");
    button.disabled = leaving;
    const free = b.free_bytes === null ? "–" : `${bytes(b.free_bytes)} (${(100 * b.free_ratio).toFixed(0)}%)`;
    return el("tr", { "data-bookie": b.id },
      el("th", { scope: "row" }, b.id),
      el("td", { class: `state state-${b.state}` }, b.state),
      el("td", { class: "rack" }, b.rack === null ? "–" : b.rack),
      el("td", { class: "ledgers" }, b.ledgers === null ? "–" : b.ledgers),
      el("td", { class: "free" }, free),
      el("td", { class: "adds" }, addsPerSecond(b, now)),
      el("td", {}, button));
  });
  $("bookies").tBodies[0].replaceChildren(...rows);
}

function repairCell(mark) {
  const p = mark.progress;
  if (!p) return "waiting for a worker";
  const total = p.fragments_total || 0;
  const done = p.fragments_done || 0;
  const bar = el("progress", { max: String(Math.max(total, 1)), value: String(done),
    "aria-label": `ledger ${mark.ledger_id} repair` });
  return el("span", {}, bar, ` ${done}/${total} fragments, ${p.entries_copied || 0} entries`);
}

function renderUnder(doc) {
  const marks = doc.ledgers;
  $("under-empty").hidden = marks.length > 0;
  $("under").hidden = marks.length === 0;
  $("under").tBodies[0].replaceChildren(...marks.map((m) => el("tr", { "data-ledger": m.ledger_id },
    el("th", { scope: "row" }, m.ledger_id),
    el("td", { class: "missing" }, [m.missing_bookies.join(", "), m.misplaced ? "placement move to another rack" : ""]
      .filter(Boolean).join("; ")),
    el("td", {}, new Date(m.marked_at).toLocaleTimeString()),
    el("td", {}, m.worker || "–"),
    el("td", {}, repairCell(m)))));
}

async function poll() {
  if (state.polling || state.needToken) return;
  state.polling = true;
  try {
    const [cluster, bookies, under] = await Promise.all([
      api("GET", "/v1/admin/cluster"), api("GET", "/v1/admin/bookies"),
      api("GET", "/v1/admin/under-replicated?limit=100")]);
    renderCluster(cluster);
    renderBookies(bookies.bookies);
    renderUnder(under);
    if (state.detail) await state.detail();
    $("token-form").hidden = true;
    $("main").hidden = false;
    showError(state.actionError);
    $("status").textContent = `Updated ${new Date().toLocaleTimeString()}`;
    $("status").dataset.updated = String(Date.now());
  } catch (err) {
    if (err instanceof NeedToken) askToken();
    else showError(err.message);
    // A token that may not even look at the cluster: offer to use another one.
    if (err instanceof Refused && $("main").hidden) $("token-form").hidden = false;
  } finally {
    state.polling = false;
  }
}

// ---------------------------------------------------------------- browsers

async function showLedgers(after) {
  const query = after === null ? `?limit=${PAGE}` : `?limit=${PAGE}&after=${after}`;
  try {
    const doc = await api("GET", "/v1/ledgers" + query);
    $("ledgers").replaceChildren(...doc.ledgers.map((id) => el("li", {},
      el("button", { type: "button", onclick: () => openLedger(id) }, `ledger ${id}`))));
    state.ledgerNext = doc.next;
    $("ledgers-next").disabled = doc.next === null;
  } catch (err) {
    if (err instanceof NeedToken) askToken(); else showError(err.message);
  }
}

function fragmentTable(ledger, end) {
  const bookies = [...new Set(ledger.fragments.flatMap((f) => f.bookies))].sort();
  const head = el("tr", {}, el("th", { scope: "col" }, "Bookie"), ...ledger.fragments.map((f, i) => {
    const next = ledger.fragments[i + 1];
    const last = next ? next.first_entry_id - 1 : end;
    const range = last >= f.first_entry_id ? `${f.first_entry_id}–${last}` : `${f.first_entry_id}–`;
    return el("th", { scope: "col" }, `entries ${range}`);
  }));
  const rows = bookies.map((b) => el("tr", { "data-bookie": b }, el("th", { scope: "row" }, b),
    ...ledger.fragments.map((f) => {
      const index = f.bookies.indexOf(b);
      return index >= 0 ? el("td", { class: "held", title: `ensemble index ${index}` }, `#${index}`)
        : el("td", { class: "empty", "aria-label": "not in this fragment" }, "");
    })));
  return el("table", { class: "fragments", "aria-label": "fragments: which bookie holds which entries" },
    el("thead", {}, head), el("tbody", {}, ...rows));
}

function openLedger(id) {
  state.detail = async () => {
    const ledger = await api("GET", `/v1/ledgers/${id}`);
    let lac = ledger.last_entry_id;
    if (ledger.state !== "CLOSED") lac = (await api("GET", `/v1/ledgers/${id}/lac`)).last_add_confirmed;
    $("h-detail").textContent = `Ledger ${id}`;
    const facts = el("dl", { class: "facts" },
      el("dt", {}, "State"), el("dd", { id: "ledger-state" }, ledger.state),
      el("dt", {}, "Last add confirmed"), el("dd", { id: "ledger-lac" }, lac),
      el("dt", {}, "Length"), el("dd", {}, bytes(ledger.length)),
      el("dt", {}, "Ensemble / write / ack quorum"),
      el("dd", {}, `${ledger.ensemble_size} / ${ledger.write_quorum} / ${ledger.ack_quorum}`),
      el("dt", {}, "Digest"), el("dd", {}, ledger.digest),
      el("dt", {}, "Metadata"), el("dd", {}, JSON.stringify(ledger.metadata)));
    $("detail-body").replaceChildren(facts, el("h3", {}, "Fragments"), fragmentTable(ledger, lac));
    $("detail").hidden = false;
  };
  return refreshDetail();
}

async function refreshDetail() {
  try {
    await state.detail();
    showError("");
  } catch (err) {
    if (err instanceof NeedToken) askToken(); else showError(err.message);
  }
}

async function showLogs(after) {
  const params = new URLSearchParams({ limit: String(PAGE), prefix: $("log-prefix").value });
  if (after !== null) params.set("after", after);
  try {
    const doc = await api("GET", "/v1/logs?" + params);
    const names = doc.logs;
    $("logs").replaceChildren(...names.map((name) => el("li", {},
      el("button", { type: "button", onclick: () => openLog(name) }, name))));
    if (!names.length) $("logs").replaceChildren(el("li", {}, "no log"));
    state.logNext = doc.next;
    $("logs-next").disabled = doc.next === null;
  } catch (err) {
    if (err instanceof NeedToken) askToken(); else showError(err.message);
  }
}

function openLog(name) {
  state.detail = async () => {
    const log = await api("GET", `/v1/logs/${encodeURIComponent(name)}`);
    const shown = log.ledgers.slice(0, LOG_LEDGERS_SHOWN);
    const ledgers = await Promise.all(shown.map((id) => api("GET", `/v1/ledgers/${id}`)));
    $("h-detail").textContent = `Log ${name}`;
    const writer = log.writer ? `${log.writer.gateway}, epoch ${log.writer.epoch}` : "none";
    const rows = ledgers.map((l) => el("tr", { "data-ledger": l.ledger_id },
      el("th", { scope: "row" }, el("button", { type: "button", onclick: () => openLedger(l.ledger_id) }, l.ledger_id)),
      el("td", {}, l.state),
      el("td", {}, `${l.ledger_id}:0`),
      el("td", {}, l.last_entry_id === null ? "open" : `${l.ledger_id}:${l.last_entry_id}`)));
    const table = el("table", { "aria-label": "the log's ledgers in order" },
      el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Ledger"), el("th", { scope: "col" }, "State"),
        el("th", { scope: "col" }, "First position"), el("th", { scope: "col" }, "Last position"))),
      el("tbody", {}, ...rows));
    const more = log.ledgers.length > shown.length ? ` (first ${shown.length} shown)` : "";
    $("detail-body").replaceChildren(el("p", {}, `Writer: ${writer}. ${log.ledgers.length} ledgers${more}.`), table);
    $("detail").hidden = false;
  };
  return refreshDetail();
}

// ---------------------------------------------------------------- wiring

document.addEventListener("DOMContentLoaded", () => {
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value);
    $("token").value = "";
    state.needToken = false;
    poll().then(() => { showLedgers(null); showLogs(null); });
  });
  $("replication-enable").addEventListener("click", () =>
    act("Enable re-replication cluster-wide?", "POST", "/v1/admin/replication/enable"));
  $("replication-disable").addEventListener("click", () =>
    act("Disable re-replication cluster-wide? Workers start no new repair; marks stay.", "POST",
      "/v1/admin/replication/disable"));
  $("ledger-search").addEventListener("submit", (event) => {
    event.preventDefault();
    openLedger(Number($("ledger-id").value));
  });
  $("ledgers-first").addEventListener("click", () => showLedgers(null));
  $("ledgers-next").addEventListener("click", () => showLedgers(state.ledgerNext));
  $("log-search").addEventListener("submit", (event) => { event.preventDefault(); showLogs(null); });
  $("logs-first").addEventListener("click", () => showLogs(null));
  $("logs-next").addEventListener("click", () => showLogs(state.logNext));
  // The gateway says in the page whether its API needs a token: without one stored,
  // ask for it first rather than make a call bound to be refused.
  if (document.body.dataset.token === "required" && !sessionStorage.getItem(TOKEN_KEY)) askToken();
  poll().then(() => { if (!$("main").hidden) { showLedgers(null); showLogs(null); } });
  setInterval(poll, POLL_MS);
});
