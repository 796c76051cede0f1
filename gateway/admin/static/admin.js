// The Quire admin page: polls the gateway's Admin API every POLL_MS (<= 2 s staleness),
// browses ledgers and logs (with their durable cursors), shows a bookie's storage (its bytes by log on demand), and
// sends the operator's actions (garbage-collection passes among them) after a
// confirmation. The token (when the gateway asks for one) lives in this tab's session
// storage only. Server text reaches the page through textContent only (el below).
"use strict";

const POLL_MS = 1000;
const PAGE = 20;
const TOKEN_KEY = "quire-admin-token";
const LOG_LEDGERS_SHOWN = 50;
// A bookie's storage report sums the bytes of every ledger it stores: read when its view
// opens, after each pass, and at most this often while the view stays open.
const STORAGE_REFRESH_MS = 5000;

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

// A byte count readable at a glance, the exact figure in its tooltip.
function sizeOf(n) {
  if (n === null || n === undefined) return "–";
  return el("span", { title: `${n} bytes`, "data-bytes": String(n) }, bytes(n));
}

function count(n) {
  return n === null || n === undefined ? "–" : n.toLocaleString("en-US");
}

function ledgerCount(n) {
  return n === 1 ? "1 ledger" : `${count(n)} ledgers`;
}

function ago(ms, now) {
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

// A time in ms since the Unix epoch: local time and how long ago, the raw value in the
// element's datetime, tooltip and data-ms.
function timeOf(ms, raw) {
  if (ms === null || ms === undefined) return "never";
  const when = new Date(ms);
  return el("time", { datetime: when.toISOString(), title: `${raw}: ${ms} (ms since the Unix epoch)`,
    "data-ms": String(ms) }, `${when.toLocaleString()} (${ago(ms, Date.now())})`);
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
    const storage = el("button", { type: "button", "aria-label": `Storage of ${b.id}`,
      onclick: () => openStorage(b.id) }, "Storage");
    const free = b.free_bytes === null ? "–" : `${bytes(b.free_bytes)} (${(100 * b.free_ratio).toFixed(0)}%)`;
    return el("tr", { "data-bookie": b.id },
      el("th", { scope: "row" }, b.id),
      el("td", { class: `state state-${b.state}` }, b.state),
      el("td", { class: "rack" }, b.rack === null ? "–" : b.rack),
      el("td", { class: "ledgers" }, b.ledgers === null ? "–" : b.ledgers),
      el("td", { class: "free" }, free),
      el("td", { class: "adds" }, addsPerSecond(b, now)),
      el("td", { class: "row-actions" }, storage, button));
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

// The log's durable cursors (docs/api.md "Logs: cursors"). The list does not page: a log
// holds at most 1,000 cursors, all listed in a scrolling box.
function cursorSection(cursors) {
  const heading = el("h3", { id: "h-cursors" }, `Cursors (${cursors.length})`);
  if (!cursors.length) return [heading, el("p", { id: "cursors-empty" }, "No durable cursor on this log.")];
  const rows = cursors.map((c) => el("tr", { "data-cursor": c.name },
    el("th", { scope: "row" }, c.name),
    el("td", { class: "position" }, c.position === null ? "none (before the first record)" : c.position),
    el("td", { class: "lag-records" }, count(c.lag_records)),
    el("td", { class: "lag-bytes" }, sizeOf(c.lag_bytes)),
    el("td", { class: "acked-at" }, timeOf(c.acked_at, "acked_at")),
    el("td", { class: "skipped" }, c.skipped_records
      ? el("span", {}, `${count(c.skipped_records)} (last `, timeOf(c.skipped_at, "skipped_at"), ")")
      : "none")));
  const table = el("table", { id: "cursors", "aria-labelledby": "h-cursors" },
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Cursor"),
      el("th", { scope: "col" }, "Position (last acknowledged)"), el("th", { scope: "col" }, "Lag (records)"),
      el("th", { scope: "col" }, "Lag (bytes)"), el("th", { scope: "col" }, "Last ack"),
      el("th", { scope: "col" }, "Removed by retention before read"))),
    el("tbody", {}, ...rows));
  // A scrolling box is a focusable region, so the keyboard scrolls it too.
  return [heading, el("div", { class: "scroll", role: "region", tabindex: "0", "aria-labelledby": "h-cursors" }, table)];
}

// The log's retention policy and what it holds (docs/api.md "Retention").
function retentionSection(log) {
  const heading = el("h3", { id: "h-retention" }, "Retention and usage");
  const p = log.retention;
  const limit = (v, show) => (v === null || v === undefined ? "none" : show(v));
  const policy = p === null
    ? el("p", { id: "retention-none" }, "No retention policy: the log keeps everything until it is truncated.")
    : el("dl", { class: "facts", id: "retention-policy" },
      el("dt", {}, "Max age"), el("dd", { id: "retention-max-age" }, limit(p.max_age_s, (s) => `${count(s)} s`)),
      el("dt", {}, "Max bytes"), el("dd", { id: "retention-max-bytes" }, limit(p.max_bytes, sizeOf)),
      el("dt", {}, "Max records"), el("dd", { id: "retention-max-records" }, limit(p.max_records, count)),
      el("dt", {}, "Kept for durable cursors"),
      el("dd", { id: "retention-cursors" }, p.retain_for_cursors
        ? el("span", {}, "yes, up to ", limit(p.max_backlog_bytes, sizeOf), " past the limits")
        : "no"));
  const u = log.usage;
  const usage = el("dl", { class: "facts", id: "log-usage" },
    el("dt", {}, "Records"), el("dd", { id: "usage-records" }, count(u.records)),
    el("dt", {}, "Bytes (ledger lengths)"), el("dd", { id: "usage-bytes" }, sizeOf(u.bytes)),
    el("dt", {}, "Ledgers"), el("dd", { id: "usage-ledgers" }, count(u.ledgers)),
    el("dt", {}, "Oldest ledger made"),
    el("dd", { id: "usage-oldest" }, u.oldest_ms === null ? "–" : timeOf(u.oldest_ms, "oldest_ms")));
  return [heading, policy, usage];
}

function openLog(name) {
  state.detail = async () => {
    const path = `/v1/logs/${encodeURIComponent(name)}`;
    const [log, cursors] = await Promise.all([api("GET", `${path}?usage=true`), api("GET", `${path}/cursors`)]);
    const shown = log.ledgers.slice(0, LOG_LEDGERS_SHOWN);
    const ledgers = await Promise.all(shown.map((id) => api("GET", `/v1/ledgers/${id}`)));
    $("h-detail").textContent = `Log ${name}`;
    const writer = log.writer ? `${log.writer.gateway}, epoch ${log.writer.epoch}` : "none";
    const rows = ledgers.map((l) => el("tr", { "data-ledger": l.ledger_id },
      el("th", { scope: "row" }, el("button", { type: "button", onclick: () => openLedger(l.ledger_id) }, l.ledger_id)),
      el("td", {}, l.state),
      el("td", {}, `${l.ledger_id}:0`),
      el("td", {}, l.last_entry_id === null ? "open" : `${l.ledger_id}:${l.last_entry_id}`)));
    const table = el("table", { id: "log-ledgers", "aria-label": "the log's ledgers in order" },
      el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Ledger"), el("th", { scope: "col" }, "State"),
        el("th", { scope: "col" }, "First position"), el("th", { scope: "col" }, "Last position"))),
      el("tbody", {}, ...rows));
    const more = log.ledgers.length > shown.length ? ` (first ${shown.length} shown)` : "";
    $("detail-body").replaceChildren(
      el("p", { id: "log-summary" }, `Writer: ${writer}. ${log.ledgers.length} ledgers${more}.`), table,
      ...retentionSection(log), ...cursorSection(cursors.cursors));
    $("detail").hidden = false;
  };
  return refreshDetail();
}

// ---------------------------------------------------------------- a bookie's storage

// One list of the storage report (orphaned or pending delete): each ledger with its bytes
// and its reason, or a sentence when there is none.
function storageList(id, title, items, total, empty) {
  const heading = el("h4", { id: `h-${id}` }, title);
  if (!total) return [heading, el("p", { id: `${id}-empty` }, empty)];
  const rows = items.map((item) => el("tr", { "data-ledger": item.ledger_id },
    el("th", { scope: "row" }, item.ledger_id), el("td", { class: "bytes" }, sizeOf(item.bytes)),
    el("td", { class: "reason" }, item.reason)));
  const more = total > items.length ? [el("p", {}, `The first ${items.length} of ${count(total)} are listed.`)] : [];
  return [heading, el("table", { id, "aria-labelledby": `h-${id}` },
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Ledger"), el("th", { scope: "col" }, "Bytes"),
      el("th", { scope: "col" }, "Reason"))),
    el("tbody", {}, ...rows)), ...more];
}

function storageFigures(report) {
  const gc = report.gc;
  const every = gc.interval_s > 0 ? `a pass every ${gc.interval_s} s` : "no pass on its own (interval 0)";
  const last = report.last_pass;
  const lastPass = last === null ? "none since the bookie started"
    : el("span", {}, `${new Date(last.at).toLocaleString()}: freed ${ledgerCount(last.freed_ledgers)} (`,
      sizeOf(last.freed_bytes), `) in ${last.took_ms} ms${last.error ? `; stopped early: ${last.error}` : ""}`);
  const totals = (id, held, n) => el("dd", { id }, `${ledgerCount(held)}, `, sizeOf(n));
  const facts = el("dl", { class: "facts" },
    el("dt", {}, "File"), el("dd", { id: "storage-file" }, sizeOf(report.file_bytes)),
    el("dt", {}, "Used by data"), el("dd", { id: "storage-used" }, sizeOf(report.file_bytes - report.free_pages_bytes)),
    el("dt", {}, "Free pages (new entries reuse them; the vacuum gives them back)"),
    el("dd", { id: "storage-free-pages" }, sizeOf(report.free_pages_bytes)),
    el("dt", {}, "Live"), totals("storage-live", report.live.ledgers, report.live.bytes),
    ...(report.purging ? [el("dt", {}, "Deleted, entries still being purged"),
      totals("storage-purging", report.purging.ledgers, report.purging.bytes)] : []),
    el("dt", {}, "Orphaned (metadata missing, within the grace)"),
    totals("storage-orphaned", report.orphaned_count, report.orphaned_bytes),
    el("dt", {}, "Pending delete (past the grace)"),
    totals("storage-pending", report.pending_delete_count, report.pending_delete_bytes),
    el("dt", {}, "Garbage collection"),
    el("dd", { id: "storage-gc" }, `${every}, grace ${gc.grace_s} s, at most ${count(gc.deletes_per_pass)} deletes a pass`),
    el("dt", {}, "Last pass"), el("dd", { id: "storage-last-pass" }, lastPass),
    el("dt", {}, "Bytes counted"),
    el("dd", { id: "storage-counted" },
      `${new Date(report.bytes_counted_at).toLocaleString()} (the count took ${report.bytes_count_ms} ms)`));
  return [facts,
    ...storageList("storage-orphaned-list", "Orphaned ledgers", report.orphaned, report.orphaned_count,
      "No ledger is orphaned."),
    ...storageList("storage-pending-list", "Ledgers pending delete", report.pending_delete,
      report.pending_delete_count, "No ledger is pending delete.")];
}

// What a pass freed, or a dry run would free (docs/api.md "POST /v1/gc").
function gcAnswer(answer) {
  const when = new Date(answer.at).toLocaleTimeString();
  const head = answer.dry_run
    ? el("p", { id: "gc-summary" }, `Dry run at ${when}: a pass now would free ${ledgerCount(answer.freed_ledgers)} (`,
      sizeOf(answer.freed_bytes), "). Nothing was deleted.")
    : el("p", { id: "gc-summary" }, `Pass at ${when}: freed ${ledgerCount(answer.freed_ledgers)} (`,
      sizeOf(answer.freed_bytes), `) in ${answer.took_ms} ms.`);
  const out = [head];
  if (answer.waiting_ledgers || answer.pending_ledgers) {
    out.push(el("p", { id: "gc-waiting" }, `Waiting for the grace: ${ledgerCount(answer.waiting_ledgers)} found ` +
      `missing (a pass starts the grace, a dry run does not). Past the grace, left for a later pass: ` +
      `${ledgerCount(answer.pending_ledgers)}.`));
  }
  if (answer.freed.length) {
    const rows = answer.freed.map((f) => el("tr", { "data-ledger": f.ledger_id },
      el("th", { scope: "row" }, f.ledger_id), el("td", {}, sizeOf(f.bytes))));
    out.push(el("table", { id: "gc-freed", "aria-label": answer.dry_run ? "ledgers a pass would free" : "ledgers freed" },
      el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Ledger"), el("th", { scope: "col" }, "Bytes"))),
      el("tbody", {}, ...rows)));
    if (answer.freed_ledgers > answer.freed.length) out.push(el("p", {}, `The first ${answer.freed.length} are listed.`));
  }
  if (answer.error) out.push(el("p", { class: "problem" }, `Stopped early: ${answer.error}`));
  return out;
}

// A bookie's bytes by log (docs/api.md "GET /v1/admin/bookies/{bookie_id}/storage",
// by_log): a row per listed log, largest first, then the plain ledgers and those whose
// metadata is gone. Log names come from ledger metadata: text only.
function byLogAnswer(byLog, at) {
  const rows = byLog.logs.map((row) => el("tr", { "data-log": row.log },
    el("th", { scope: "row" }, row.log), el("td", {}, count(row.ledgers)), el("td", { class: "bytes" }, sizeOf(row.bytes))));
  const other = (key, label, always) => {
    const bucket = byLog[key];
    if (!always && !bucket.ledgers) return [];
    return [el("tr", { "data-bucket": key }, el("th", { scope: "row" }, el("em", {}, label)),
      el("td", {}, count(bucket.ledgers)), el("td", { class: "bytes" }, sizeOf(bucket.bytes)))];
  };
  const summary = `Counted at ${at.toLocaleTimeString()}: ${ledgerCount(byLog.ledgers_looked_at)} looked at, ` +
    `${byLog.logs_count === 1 ? "1 log" : `${count(byLog.logs_count)} logs`}.`;
  const out = [el("p", { id: "by-log-summary" }, summary)];
  if (byLog.truncated) {
    out.push(el("p", { class: "problem", id: "by-log-truncated" },
      "The count stopped at its bound: the totals cover the ledgers looked at (the lowest ids)."));
  }
  out.push(el("table", { id: "by-log-table", "aria-labelledby": "h-by-log" },
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Log"), el("th", { scope: "col" }, "Ledgers"),
      el("th", { scope: "col" }, "Bytes"))),
    el("tbody", {}, ...rows,
      ...other("not_in_a_log", "Not in a log (plain ledgers)", true),
      ...other("metadata_missing", "Metadata missing (deleted: garbage collection gives them back)", true),
      ...other("metadata_unreadable", "Metadata unreadable", false))));
  if (byLog.logs_count > byLog.logs.length) {
    out.push(el("p", {}, `The largest ${byLog.logs.length} of ${count(byLog.logs_count)} logs are listed.`));
  }
  return out;
}

// The storage view of one bookie. Its figures are read again while it is open; the
// garbage-collection controls are built once, so focus and the last answer stay put.
// A real pass is offered after a dry run only, and asks for confirmation; a token that
// may not act (403) gets the refusal in the view and the buttons disabled.
function openStorage(id) {
  const path = `/v1/admin/bookies/${encodeURIComponent(id)}`;
  const view = { readAt: -Infinity, dry: null, refused: false, running: false };
  const figures = el("div", { id: "storage-figures" }, el("p", {}, "Reading the storage report…"));
  const dry = el("button", { type: "button", id: "gc-dry-run" }, "Dry run");
  const run = el("button", { type: "button", id: "gc-run" }, "Run a pass…");
  const result = el("div", { id: "gc-result", "aria-live": "polite" },
    el("p", {}, "A dry run first says what a pass would free now, deleting nothing."));
  const controls = () => {
    dry.disabled = view.refused || view.running;
    run.disabled = view.refused || view.running || view.dry === null;
  };

  const refresh = async () => {
    view.readAt = performance.now();
    try {
      figures.replaceChildren(...storageFigures(await api("GET", `${path}/storage`)));
      figures.dataset.updated = String(Date.now());
    } catch (err) {
      if (err instanceof NeedToken) throw err;
      // A bookie that is down (503) or unknown (404): said in the view, never a blank one.
      figures.replaceChildren(el("p", { class: "problem", role: "alert" },
        `No storage report from bookie ${id}: ${err.message}`));
    }
  };

  const pass = async (dryRun) => {
    if (!dryRun) {
      const d = view.dry;
      const text = `Run a garbage-collection pass on bookie ${id} now? It deletes the local data of ledgers ` +
        `whose metadata is gone and whose grace has passed. The dry run at ${new Date(d.at).toLocaleTimeString()} ` +
        `said a pass would free ${ledgerCount(d.freed_ledgers)} (${bytes(d.freed_bytes)}).`;
      if (!(await confirmAction(text))) return;
    }
    view.running = true;
    controls();
    result.replaceChildren(el("p", {}, dryRun ? "Dry run: looking…" : "Running a pass…"));
    try {
      const answer = await api("POST", `${path}/gc?dry_run=${dryRun}`);
      result.replaceChildren(...gcAnswer(answer));
      result.dataset.dryRun = String(answer.dry_run);
      view.dry = dryRun ? answer : null;  // a real pass asks for a new dry run first
    } catch (err) {
      if (err instanceof NeedToken) return askToken();
      if (err instanceof Refused) view.refused = true;
      const what = dryRun ? "The dry run" : "The pass";
      const hint = err instanceof Refused ? " (garbage collection needs a token with the admin scope)" : "";
      result.replaceChildren(el("p", { class: "problem", role: "alert" }, `${what} failed: ${err.message}${hint}`));
      delete result.dataset.dryRun;
    } finally {
      view.running = false;
      controls();
    }
    if (!dryRun) {
      view.readAt = -Infinity;
      await refreshDetail();
    }
  };
  dry.addEventListener("click", () => pass(true));
  run.addEventListener("click", () => pass(false));
  controls();

  // The count by log reads the metadata of every ledger the bookie stores: on demand only.
  const countByLog = el("button", { type: "button", id: "by-log-count" }, "Count by log");
  const byLog = el("div", { id: "by-log-result", "aria-live": "polite" },
    el("p", {}, "Which logs the bytes belong to: counting reads the metadata of every ledger " +
      "stored on the bookie, so it runs only when asked."));
  countByLog.addEventListener("click", async () => {
    countByLog.disabled = true;
    byLog.replaceChildren(el("p", {}, "Counting by log…"));
    try {
      const report = await api("GET", `${path}/storage?by_log=true`);
      byLog.replaceChildren(...byLogAnswer(report.by_log, new Date()));
      byLog.dataset.counted = String(Date.now());
      figures.replaceChildren(...storageFigures(report));
      view.readAt = performance.now();
    } catch (err) {
      if (err instanceof NeedToken) return askToken();
      byLog.replaceChildren(el("p", { class: "problem", role: "alert" }, `The count by log failed: ${err.message}`));
    } finally {
      countByLog.disabled = false;
    }
  });

  $("h-detail").textContent = `Bookie ${id}: storage`;
  $("detail-body").replaceChildren(figures,
    el("section", { class: "by-log", "aria-labelledby": "h-by-log" }, el("h3", { id: "h-by-log" }, "By log"),
      el("p", { class: "actions" }, countByLog), byLog),
    el("section", { class: "gc", "aria-labelledby": "h-gc" }, el("h3", { id: "h-gc" }, "Garbage collection"),
      el("p", { class: "actions" }, dry, run), result));
  $("detail").hidden = false;
  state.detail = async () => {
    if (performance.now() - view.readAt >= STORAGE_REFRESH_MS) await refresh();
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
