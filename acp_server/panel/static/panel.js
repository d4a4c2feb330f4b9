// The review panel: plain DOM, no framework, no build step. Everything it shows comes from the
// panel's JSON API; text is always set with textContent (entries are model-written: never HTML).
"use strict";

const TOKEN = new URLSearchParams(location.search).get("token") || "";
const KINDS = ["prompt", "memory", "skill", "subagent"];
const TRIGGERS = ["user", "model", "auto", "rollback", "cli"];
const PAGE = 50;
const ENTRY_PAGE = 100;

const state = {
  sessions: [],
  timeline: { filters: { scope: "", session: "", kind: "", trigger: "" }, items: [], next: null, total: 0 },
  entries: { filters: { scope: "", kind: "", trust: "", review: "", q: "" }, offset: 0 },
  detail: null, // {type: "refinement"|"entry", ...}
  lastEvent: null,
  inServer: false, // served inside an ACP server (`/harness ui`): its actions show cards there
};

// ---------------------------------------------------------------- helpers

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

async function api(path, options = {}) {
  const headers = { "X-Panel-Token": TOKEN, ...(options.body ? { "Content-Type": "application/json" } : {}) };
  const response = await fetch(path, { ...options, headers, cache: "no-store" });
  let body = null;
  try { body = await response.json(); } catch (_) { body = { error: `HTTP ${response.status}` }; }
  if (!response.ok && response.status !== 409) throw new Error(body.error || `HTTP ${response.status}`);
  return body;
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== "" && v !== null && v !== undefined) q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : "";
}

function when(iso) {
  if (!iso) return "";
  const d = new Date(typeof iso === "number" ? iso * 1000 : iso);
  if (isNaN(d)) return String(iso);
  return d.toISOString().slice(0, 19).replace("T", " ");
}

function badge(text, kind) { return h("span", { class: `badge ${kind || text}`, text }); }

function refLink(id, label) {
  return h("a", { href: `#refinement/${encodeURIComponent(id)}`, class: "rid", text: label || id });
}

function sessionLink(sid) {
  if (!sid) return h("span", { class: "muted", text: "—" });
  return h("a", { href: `#session/${encodeURIComponent(sid)}`, class: "sid", text: sid });
}

function toast(text, refinementIds = []) {
  const el = document.getElementById("toast");
  const ids = (Array.isArray(refinementIds) ? refinementIds : [refinementIds]).filter(Boolean);
  fill(el, h("span", { text }), ids.map((id) => h("span", {}, " ", refLink(id, `open ${id}`))));
  el.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { el.hidden = true; }, 12000);
}

function select(label, value, options, onchange) {
  const id = `f-${label.toLowerCase().replace(/\W+/g, "-")}`;
  return h("label", { for: id }, label, " ",
    h("select", { id, onchange: (e) => onchange(e.target.value) },
      options.map(([v, t]) => h("option", { value: v, selected: v === value, text: t }))));
}

// ---------------------------------------------------------------- confirmation

function confirmAction(title, text, errors = []) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-errors").replaceChildren(...errors.map((e) => h("li", { text: e })));
  dialog.returnValue = "cancel";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
    document.getElementById("confirm-cancel").focus();
  });
}

async function runAction(name, body, title, text) {
  if (!(await confirmAction(title, text))) return null;
  let result = await api(`/api/actions/${name}`, { method: "POST", body: JSON.stringify(body) });
  if (!result.ok && result.conflict && name === "rollback" && !body.force) {
    const force = await confirmAction(
      "Force the rollback?",
      "Entries changed after this refinement; rolling it back anyway overwrites those later changes.",
      result.errors,
    );
    if (force) result = await api(`/api/actions/${name}`, { method: "POST", body: JSON.stringify({ ...body, force: true }) });
  }
  const shown = result.via_session ? ` (shown in session ${result.via_session}'s editor)` : "";
  toast(result.message + shown + (result.errors.length && !result.ok ? ` ${result.errors.join("; ")}` : ""),
    result.refinement_ids && result.refinement_ids.length ? result.refinement_ids : result.refinement_id);
  await refresh();
  return result;
}

// ---------------------------------------------------------------- views

function diffView(lines) {
  if (!lines || !lines.length) return h("p", { class: "muted", text: "no textual change (trust or metadata only)" });
  return h("pre", { class: "diff", tabindex: "0" },
    lines.map((l) => h("span", { class: { "+": "add", "-": "del", "@": "hunk", "=": "ctx" }[l.op] },
      (l.op === "=" ? " " : l.op === "@" ? "" : l.op) + (l.op === "@" ? l.text : ` ${l.text}`), "\n")));
}

function evidenceView(quotes) {
  if (!quotes || !quotes.length) return null;
  return h("div", { class: "evidence" }, h("h4", { text: "Evidence" }),
    quotes.map((q) => h("blockquote", { class: q.found ? "" : "missing" },
      h("div", { class: "cite" },
        q.session_id ? h("a", { href: `#session/${encodeURIComponent(q.session_id)}/${encodeURIComponent(q.message_id)}`, text: `${q.role || "message"} ${q.message_id}` })
          : h("span", { text: q.message_id }),
        q.session_id ? h("span", { class: "muted" }, " in ", q.session_id) : null),
      h("p", { text: q.found ? q.text : "(not in the session transcript)" }))));
}

function editView(edit) {
  const versions = edit.before_version || edit.after_version
    ? ` v${edit.before_version ?? "–"} → v${edit.after_version ?? "–"}` : "";
  const trust = edit.before_trust !== edit.after_trust && (edit.before_trust || edit.after_trust)
    ? ` · ${edit.before_trust || "new"} → ${edit.after_trust || "deleted"}` : "";
  return h("section", { class: `edit ${edit.applied ? "applied" : "refused"}` },
    h("h3", {}, badge(edit.action, `act-${edit.action}`), " ", badge(edit.kind, "kind"), " ",
      h("code", { text: edit.id || "?" }), edit.title ? h("span", { class: "muted", text: ` ${edit.title}` }) : null,
      h("span", { class: "muted", text: versions + trust })),
    edit.applied ? null : h("p", { class: "refusal" }, h("strong", { text: "Refused: " }), edit.error || "not applied"),
    edit.reason ? h("p", { class: "muted", text: `Reason: ${edit.reason}` }) : null,
    edit.diff && edit.diff.length ? diffView(edit.diff)
      : edit.proposed ? [h("p", { class: "muted small", text: "Proposed content:" }), h("pre", { class: "content", text: edit.proposed })]
      : diffView(edit.diff),
    evidenceView(edit.evidence));
}

function timelineRow(r) {
  const status = r.refused && !r.applied ? badge("refused", "refused") : r.refused ? badge(`${r.refused} refused`, "refused") : null;
  return h("li", { class: `tl-item${state.detail && state.detail.id === r.id ? " selected" : ""}`, "data-refinement": r.id },
    h("a", { href: `#refinement/${encodeURIComponent(r.id)}`, class: "tl-link" },
      h("span", { class: "tl-when", text: when(r.created_at) }),
      h("span", { class: "tl-summary", text: r.summary || "(no summary)" })),
    h("span", { class: "tl-meta" },
      badge(r.scope, `scope-${r.scope}`), r.rollback_of ? null : badge(r.trigger, "trigger"), status,
      r.rollback_of ? badge("rollback", "rollback") : null,
      r.review_of ? badge("review", "review") : null,
      r.rolled_back_by ? badge("rolled back", "undone") : null,
      r.tombstoned && r.tombstoned.length ? badge("tombstoned", "refused") : null,
      r.lifted && r.lifted.length ? badge("tombstone lifted", "review") : null,
      h("span", { class: "muted", text: r.edits.map((e) => `${e.action} ${e.kind} ${e.id || "?"}`).join(", ") })));
}

async function showTimeline(append = false) {
  const t = state.timeline;
  const before = append ? t.next : null;
  const page = await api(`/api/timeline${query({ ...t.filters, before, limit: PAGE })}`);
  t.items = append ? t.items.concat(page.refinements) : page.refinements;
  t.next = page.next_cursor;
  t.total = page.total;
  document.getElementById("count-timeline").textContent = page.total;
  const sessions = [["", "all sessions"], ...state.sessions.map((s) => [s.session_id, s.title ? `${s.session_id} — ${s.title}` : s.session_id])];
  const filter = (name) => (value) => { t.filters[name] = value; showTimeline(); };
  render(
    h("h2", { text: "Refinement timeline" }, h("span", { class: "muted", text: ` newest first · ${page.total} in all` })),
    h("form", { class: "filters", onsubmit: (e) => e.preventDefault() },
      select("Scope", t.filters.scope, [["", "all scopes"], ["global", "global"], ["local", "local"]], filter("scope")),
      select("Session", t.filters.session, sessions, filter("session")),
      select("Kind", t.filters.kind, [["", "all kinds"], ...KINDS.map((k) => [k, k])], filter("kind")),
      select("Trigger", t.filters.trigger, [["", "all triggers"], ...TRIGGERS.map((k) => [k, k])], filter("trigger"))),
    t.items.length ? h("ol", { class: "timeline", id: "timeline" }, t.items.map(timelineRow))
      : emptyNote("No refinements match."),
    t.next ? h("button", { type: "button", id: "older", onclick: () => showTimeline(true), text: "Load older refinements" }) : null,
  );
}

async function showRefinement(id) {
  const r = await api(`/api/refinements/${encodeURIComponent(id)}`);
  state.detail = { type: "refinement", id };
  const canRollBack = r.applied > 0 && !r.rolled_back_by;
  const detail = document.getElementById("detail");
  fill(detail,
    h("div", { class: "detail-head" },
      h("h2", { text: r.summary || "(no summary)" }),
      h("button", { type: "button", class: "close", "aria-label": "Close details", onclick: closeDetail, text: "×" })),
    h("dl", { class: "meta" },
      h("dt", { text: "Refinement" }), h("dd", {}, h("code", { id: "detail-id", text: r.id })),
      h("dt", { text: "When" }), h("dd", { text: when(r.created_at) }),
      h("dt", { text: "Scope" }), h("dd", {}, badge(r.scope, `scope-${r.scope}`), " ", badge(r.trigger, "trigger")),
      h("dt", { text: "Session" }), h("dd", {}, sessionLink(r.session_id)),
      h("dt", { text: "Edits" }), h("dd", { text: `${r.applied} applied, ${r.refused} refused` }),
      r.rollback_of ? [h("dt", { text: "Rolls back" }), h("dd", {}, refLink(r.rollback_of))] : null,
      r.review_of ? [h("dt", { text: "Reviews" }), h("dd", {}, refLink(r.review_of))] : null,
      r.rolled_back_by ? [h("dt", { text: "Rolled back by" }), h("dd", {}, refLink(r.rolled_back_by))] : null,
      r.tombstoned && r.tombstoned.length ? [h("dt", { text: "Tombstoned" }), h("dd", { text: r.tombstoned.join(", ") })] : null,
      r.lifted && r.lifted.length ? [h("dt", { text: "Lifted" }), h("dd", { text: r.lifted.join(", ") })] : null),
    r.rationale ? h("p", { class: "rationale", text: r.rationale }) : null,
    h("div", { class: "buttons" },
      canRollBack ? h("button", { type: "button", id: "rollback", class: "danger",
        onclick: () => runAction("rollback", { refinement_id: r.id, force: false }, "Roll back this refinement?",
          `Roll back ${r.id} (${r.summary || "no summary"})? Its inverse is applied as a new refinement, which can itself be rolled back.`),
        text: "Roll back…" }) : null,
      h("a", { href: `#asof/${encodeURIComponent(r.id)}`, class: "button", text: "Harness as of this refinement" })),
    r.edits.map(editView),
  );
  document.querySelectorAll(".tl-item").forEach((li) => li.classList.toggle("selected", li.dataset.refinement === id));
  detail.classList.add("open");
}

function closeDetail() {
  state.detail = null;
  const detail = document.getElementById("detail");
  detail.replaceChildren();
  detail.classList.remove("open");
  if (location.hash.startsWith("#refinement/") || location.hash.startsWith("#entry/")) history.replaceState(null, "", `${location.search}#${lastTab}`);
}

// The entry's counters (agent_core/trust/entry_counters.py): shown, followed, how those turns went.
function countersText(c) {
  return `shown ${c.shown}, followed ${c.followed} (${c.passed} passed, ${c.failed} failed) — ${c.standing}`;
}

function entryRow(e) {
  return h("tr", { "data-entry": `${e.store}/${e.kind}/${e.id}` },
    h("td", {}, h("a", { href: `#entry/${encodeURIComponent(e.store)}/${e.kind}/${encodeURIComponent(e.id)}`, text: e.key })),
    h("td", {}, h("div", { text: e.title }), h("div", { class: "muted preview", text: e.preview }),
      e.usage ? h("div", { class: e.usage.review ? "usage review small" : "usage muted small", text: e.usage.text.replace(/\*\*/g, "") }) : null,
      e.usage && e.usage.counters ? h("div", { class: e.usage.counters.standing === "harmful" ? "usage review small" : "usage muted small", text: countersText(e.usage.counters) }) : null),
    h("td", {}, badge(e.scope, `scope-${e.scope}`), e.session_id ? h("div", { class: "muted small" }, sessionLink(e.session_id)) : null),
    h("td", {}, badge(e.trust, `trust-${e.trust}`)),
    h("td", { class: "num", text: `v${e.version}` }),
    h("td", { class: "small", text: when(e.updated_at) }),
    h("td", {}, e.last_refinement ? refLink(e.last_refinement) : h("span", { class: "muted", text: "—" })),
    h("td", { class: "actions" },
      e.trust !== "verified" && e.last_refinement !== null ? h("button", { type: "button", class: "verify",
        onclick: () => runAction("verify", { store: e.store, kind: e.kind, id: e.id }, "Mark verified?",
          `Mark ${e.kind} ${e.id} verified (approve it in review)?`), text: "Verify" }) : null,
      e.store !== "global" ? promoteButton(e, "global") : null,
      h("button", { type: "button", class: "delete danger",
        onclick: () => runAction("delete", { store: e.store, kind: e.kind, id: e.id }, "Delete this entry?",
          `Delete ${e.kind} ${e.id} from the ${e.scope} harness? The deletion is a refinement you can roll back.`), text: "Delete" })));
}

function promoteButton(e, target) {
  // `/promote`: create in the target, then delete the local copy; rolling back either undoes both.
  return h("button", { type: "button", class: "promote", "data-target": target,
    onclick: () => runAction("promote", { store: e.store, kind: e.kind, id: e.id, target }, `Promote to ${target}?`,
      `Move ${e.kind} ${e.id} from session ${e.store}'s local harness to the ${target} harness? Two refinements: the ${target} copy, then the local removal; rolling back either undoes both.`),
    text: `Promote to ${target}` });
}

function entriesTable(rows, withActions = true) {
  const groups = KINDS.map((k) => [k, rows.filter((r) => r.kind === k)]).filter(([, list]) => list.length);
  if (!groups.length) return emptyNote("No entries match.");
  return groups.map(([kind, list]) => h("section", { class: "kind-group" },
    h("h3", { text: `${kind} (${list.length})` }),
    h("table", { class: "entries" },
      h("thead", {}, h("tr", {}, ["Id", "Title", "Scope", "Trust", "Version", "Last change", "Made by", withActions ? "Actions" : ""].map((t) => h("th", { scope: "col", text: t })))),
      h("tbody", {}, list.map((e) => {
        const row = entryRow(e);
        if (!withActions) row.lastChild.replaceChildren();
        return row;
      })))));
}

async function showEntries() {
  const s = state.entries;
  const page = await api(`/api/entries${query({ ...s.filters, offset: s.offset, limit: ENTRY_PAGE })}`);
  document.getElementById("count-entries").textContent = page.total;
  const filter = (name) => (value) => { s.filters[name] = value; s.offset = 0; showEntries(); };
  const search = h("input", { type: "search", id: "f-search", value: s.filters.q, placeholder: "title, content, id", "aria-label": "Search entries" });
  render(
    h("h2", { text: "Entries" }, h("span", { class: "muted", text: ` ${page.total} (${KINDS.map((k) => `${page.counts[k]} ${k}`).join(", ")})` })),
    h("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); filter("q")(search.value); } },
      select("Scope", s.filters.scope, [["", "all scopes"], ["global", "global"], ["local", "local"]], filter("scope")),
      select("Kind", s.filters.kind, [["", "all kinds"], ...KINDS.map((k) => [k, k])], filter("kind")),
      select("Trust", s.filters.trust, [["", "any trust"], ["candidate", "candidate"], ["verified", "verified"], ["rejected", "rejected"]], filter("trust")),
      select("Use", s.filters.review, [["", "any use"], ["marked", "marked for review"]], filter("review")),
      search, h("button", { type: "submit", text: "Search" })),
    entriesTable(page.entries),
    page.total > ENTRY_PAGE ? h("div", { class: "pager" },
      h("button", { type: "button", disabled: s.offset === 0, onclick: () => { s.offset = Math.max(0, s.offset - ENTRY_PAGE); showEntries(); }, text: "Previous" }),
      h("span", { class: "muted", text: ` ${s.offset + 1}–${Math.min(s.offset + ENTRY_PAGE, page.total)} of ${page.total} ` }),
      h("button", { type: "button", disabled: s.offset + ENTRY_PAGE >= page.total, onclick: () => { s.offset += ENTRY_PAGE; showEntries(); }, text: "Next" })) : null,
  );
}

async function showEntry(store, kind, id) {
  const e = await api(`/api/entries/${encodeURIComponent(store)}/${kind}/${encodeURIComponent(id)}`);
  state.detail = { type: "entry", id: `${store}/${kind}/${id}` };
  const detail = document.getElementById("detail");
  fill(detail,
    h("div", { class: "detail-head" }, h("h2", { text: e.title }),
      h("button", { type: "button", class: "close", "aria-label": "Close details", onclick: closeDetail, text: "×" })),
    h("dl", { class: "meta" },
      h("dt", { text: "Entry" }), h("dd", {}, h("code", { text: `${e.kind} ${e.key}` })),
      h("dt", { text: "Scope" }), h("dd", {}, badge(e.scope, `scope-${e.scope}`), e.session_id ? [" ", sessionLink(e.session_id)] : null),
      h("dt", { text: "Trust" }), h("dd", {}, badge(e.trust, `trust-${e.trust}`)),
      h("dt", { text: "Version" }), h("dd", { text: `v${e.version}, updated ${when(e.updated_at)}` }),
      h("dt", { text: "Path" }), h("dd", { text: e.path }),
      e.usage ? h("dt", { text: "Use in prompts" }) : null,
      e.usage ? h("dd", { class: e.usage.review ? "usage review" : "usage", text: e.usage.text.replace(/\*\*/g, "") }) : null),
    h("pre", { class: "content", text: e.content }),
    Object.keys(e.reference || {}).length ? h("pre", { class: "content small", text: `reference: ${JSON.stringify(e.reference)}\narguments: ${JSON.stringify(e.arguments)}` }) : null,
    evidenceView(e.evidence),
    e.promote_targets && e.promote_targets.length ? h("div", { class: "buttons" }, e.promote_targets.map((t) => promoteButton(e, t))) : null,
    h("h3", { text: "Refinements that wrote it" }),
    h("ol", { class: "timeline" }, e.refinements.map(timelineRow)));
  detail.classList.add("open");
}

async function showPending() {
  const { pending } = await api("/api/pending");
  document.getElementById("count-pending").textContent = pending.length || "";
  render(
    h("h2", { text: "Pending reviews" }),
    pending.length ? pending.map((p) => h("article", { class: "card pending", "data-proposal": p.proposal_id },
      h("h3", {}, p.summary || "(no summary)", " ", badge(p.scope, `scope-${p.scope}`), " ", badge(p.trigger, "trigger")),
      h("p", { class: "muted" }, h("code", { text: p.proposal_id }), " · proposed ", when(p.created_at), " by ", sessionLink(p.session_id)),
      p.rationale ? h("p", { class: "rationale", text: p.rationale }) : null,
      p.edits.map((e) => h("section", { class: "edit" },
        h("h4", {}, badge(e.action, `act-${e.action}`), " ", badge(e.kind, "kind"), " ", h("code", { text: e.id || "?" })),
        e.reason ? h("p", { class: "muted", text: `Reason: ${e.reason}` }) : null,
        diffView(e.diff), evidenceView(e.evidence))),
      h("div", { class: "buttons" },
        h("button", { type: "button", class: "primary", onclick: () => runAction("review", { proposal_id: p.proposal_id, decision: "apply", store: p.store }, "Apply this proposal?", `Apply ${p.proposal_id} to the ${p.scope} harness (its entries become verified)?`), text: "Approve" }),
        h("button", { type: "button", onclick: () => runAction("review", { proposal_id: p.proposal_id, decision: "reject", store: p.store }, "Reject this proposal?", `Reject ${p.proposal_id}? Its content is tombstoned: the same content is refused later.`), text: "Reject" }),
        h("button", { type: "button", class: "danger", onclick: () => runAction("review", { proposal_id: p.proposal_id, decision: "reject_forever", store: p.store }, "Reject forever?", `Reject ${p.proposal_id} forever? The same content and these entry ids are refused later.`), text: "Reject forever" }))))
      : emptyNote("Nothing is waiting for review."),
  );
}

async function showTombstones() {
  const { tombstones } = await api("/api/tombstones");
  render(
    h("h2", { text: "Tombstones" }, h("span", { class: "muted", text: ` rejected content the model may not write again (${tombstones.length})` })),
    tombstones.length ? h("table", { class: "entries" },
      h("thead", {}, h("tr", {}, ["Id", "Kind", "Entry", "Scope", "Content", "Reason", "When"].map((t) => h("th", { scope: "col", text: t })))),
      h("tbody", {}, tombstones.map((t) => h("tr", {},
        h("td", {}, h("code", { text: t.id })), h("td", { text: t.kind }), h("td", {}, h("code", { text: t.entry_id || "—" }), t.forever ? badge("forever", "refused") : null),
        h("td", {}, badge(t.scope, `scope-${t.scope}`), t.store !== "global" ? h("div", { class: "small" }, sessionLink(t.store)) : null),
        h("td", { class: "preview", text: t.content }), h("td", {}, t.reason, t.refinement_id ? [" ", refLink(t.refinement_id)] : null), h("td", { class: "small", text: when(t.created_at) })))))
      : h("p", { class: "empty", text: "No tombstones." }),
  );
}

function sessionsTable() {
  return h("table", { class: "entries" },
    h("thead", {}, h("tr", {}, ["Session", "Title", "Working directory", "State", "Quiescence", "Pending reviews", "Local refinements", "Last local refinement"].map((t) => h("th", { scope: "col", text: t })))),
    h("tbody", {}, state.sessions.map((s) => h("tr", { "data-session": s.session_id },
      h("td", {}, sessionLink(s.session_id)), h("td", { text: s.title || "" }), h("td", { class: "small", text: s.cwd }),
      h("td", {}, s.open === null ? badge("unknown", "trigger") : s.open ? badge(`open (pid ${s.owner_pid})`, "open") : badge("closed", "closed")),
      h("td", { class: "quiescence" }, quiescenceView(s.quiescence)),
      h("td", { class: "num", text: s.pending_reviews }), h("td", { class: "num", text: s.refinements }),
      h("td", { class: "small", text: when(s.last_refinement_at) })))));
}

function quiescenceView(q) {
  // From this server's memory (`/harness ui`) or from the quiescence.json another server keeps.
  if (!q) return h("span", { class: "muted", text: "—" });
  if (q.state === "unknown" || q.state === "not running") {
    return h("span", { title: q.reason || "" }, badge(q.state, q.state === "unknown" ? "trigger" : "closed"),
      q.reason ? h("div", { class: "small muted", text: q.reason }) : null);
  }
  if (q.quiescent) return badge("settled", "quiet");
  return h("span", {}, badge("busy", "busy"),
    h("ul", { class: "background small" }, q.background.map((b) => h("li", { text: b.type === "session" ? `subagent ${b.name}: ${b.state}` : b.title }))));
}

async function showSessions() {
  render(
    h("h2", { text: "Sessions" }),
    h("p", { class: "muted", text: state.inServer
      ? "Open means a server process holds the session now. Quiescence (refinement jobs queued or running, subagents still working) is live: read in memory for the sessions this server has open, as published by their server for the others; pending reviews are counted from disk."
      : "Open means a server process holds the session now. Quiescence (refinement jobs queued or running, subagents still working) is what the server that has the session open publishes, live; pending reviews are counted from disk." }),
    state.sessions.length ? sessionsTable() : h("p", { class: "empty", text: "No sessions yet." }),
  );
}

async function showSession(sid, messageId) {
  const t = await api(`/api/sessions/${encodeURIComponent(sid)}/transcript`);
  const info = state.sessions.find((s) => s.session_id === sid) || {};
  render(
    h("h2", {}, "Session ", h("code", { text: sid }), info.title ? h("span", { class: "muted", text: ` ${info.title}` }) : null),
    h("p", {}, h("a", { href: "#timeline", onclick: () => { state.timeline.filters.session = sid; }, text: "Its refinements in the timeline" })),
    h("ol", { class: "transcript" }, t.messages.map((m) => h("li", { id: `m-${m.message_id}`, class: `msg ${m.role}${m.message_id === messageId ? " cited" : ""}` },
      h("div", { class: "cite" }, badge(m.role, "trigger"), " ", h("code", { text: m.message_id }), m.title ? h("span", { class: "muted", text: ` ${m.title}` }) : null),
      h("pre", { class: "msg-text", text: m.text })))),
  );
  if (messageId) {
    const el = document.getElementById(`m-${messageId}`);
    if (el) { el.scrollIntoView({ block: "center" }); el.setAttribute("tabindex", "-1"); el.focus(); }
  }
}

async function showAsOf(id) {
  const a = await api(`/api/as-of/${encodeURIComponent(id)}`);
  render(
    h("h2", {}, "Harness as of ", refLink(id)),
    h("p", { class: "muted" }, `Right after “${a.refinement.summary || id}” (${when(a.refinement.created_at)})`,
      a.global_as_of ? [", global entries as of ", refLink(a.global_as_of)] : null, "."),
    entriesTable(a.entries, false),
  );
}

function fill(el, ...children) {
  el.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

// While the harness holds nothing at all (a first run, or after the demo, which keeps its session in
// a throwaway data dir) an empty view says what the panel is and how an entry gets here.
function emptyNote(text) {
  if (!state.welcome) return h("p", { class: "empty", text });
  return h("div", { class: "empty welcome" }, state.welcome.split("\n\n").map((para) => h("p", { text: para })));
}

function render(...children) {
  fill(document.getElementById("view"), ...children);
}

// ---------------------------------------------------------------- routing and live updates

function currentTab() {
  const tab = location.hash.slice(1).split("/")[0];
  return ["entries", "timeline", "pending", "tombstones", "sessions"].includes(tab) ? tab : null;
}

let lastTab = "timeline";

async function route(again = false) {
  const parts = location.hash.slice(1).split("/").map(decodeURIComponent);
  const empty = again === true || !document.getElementById("view").childElementCount;
  try {
    if (parts[0] === "refinement" && parts[1]) {
      if (empty) await showTab(lastTab);
      await showRefinement(parts[1]);
      return;
    }
    if (parts[0] === "entry" && parts[3]) {
      if (empty) await showTab(lastTab === "timeline" && !document.getElementById("view").childElementCount ? "entries" : lastTab);
      await showEntry(parts[1], parts[2], parts.slice(3).join("/"));
      return;
    }
    if (parts[0] === "asof" && parts[1]) { markTab(null); await showAsOf(parts[1]); return; }
    if (parts[0] === "session" && parts[1]) { markTab("sessions"); await showSession(parts[1], parts[2]); return; }
    await showTab(currentTab() || lastTab);
  } catch (err) {
    toast(`Could not load: ${err.message}`);
  }
}

function markTab(tab) {
  document.querySelectorAll("nav.tabs a").forEach((a) => {
    if (a.dataset.tab === tab) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  });
}

async function showTab(tab) {
  lastTab = tab;
  markTab(tab);
  const show = { entries: showEntries, timeline: showTimeline, pending: showPending, tombstones: showTombstones, sessions: showSessions }[tab];
  await show();
}

async function loadOverview() {
  const o = await api("/api/overview");
  state.sessions = o.sessions;
  state.inServer = o.in_server;
  state.welcome = o.welcome;
  document.getElementById("home").textContent = o.home;
  const open = o.sessions.filter((s) => s.open).length;
  document.getElementById("count-sessions").textContent = open ? `${open} open` : o.sessions.length || "";
  const waiting = o.sessions.reduce((n, s) => n + s.pending_reviews, 0);
  return waiting;
}

async function loadCounts() {
  const [, pending] = await Promise.all([loadOverview(), api("/api/pending")]);
  document.getElementById("count-pending").textContent = pending.pending.length || "";
}

let refreshing = null;
let again = false;
async function refresh() {
  // One refresh at a time; a change that arrives meanwhile triggers exactly one more.
  if (refreshing) { again = true; return refreshing; }
  refreshing = (async () => {
    do {
      again = false;
      try {
        await Promise.all([loadCounts(), route(true)]);
      } catch (err) { toast(`Could not refresh: ${err.message}`); }
    } while (again);
  })();
  try { await refreshing; } finally { refreshing = null; }
  document.body.dataset.refreshed = String(Date.now());
}

function connect() {
  const live = document.getElementById("live");
  const source = new EventSource(`/api/events?token=${encodeURIComponent(TOKEN)}`);
  source.addEventListener("hello", () => { live.textContent = "● live"; live.className = "live on"; });
  for (const kind of ["change", "sessions", "reload"]) {
    source.addEventListener(kind, (e) => {
      state.lastEvent = e.data;
      live.textContent = `● live · updated ${new Date().toLocaleTimeString()}`;
      refresh();
    });
  }
  source.addEventListener("quiescence", (e) => {
    // The whole snapshot of every session's quiescence: update the rows in place (no refetch).
    const quiet = JSON.parse(e.data).sessions;
    for (const s of state.sessions) s.quiescence = quiet[s.session_id] || null;
    for (const cell of document.querySelectorAll("tr[data-session] td.quiescence")) {
      const row = state.sessions.find((s) => s.session_id === cell.parentElement.dataset.session);
      if (row) cell.replaceChildren(quiescenceView(row.quiescence));
    }
  });
  source.onerror = () => { live.textContent = "○ reconnecting…"; live.className = "live off"; };
}

document.addEventListener("keydown", (e) => {
  if (e.key === "Escape" && state.detail && !document.getElementById("confirm").open) closeDetail();
});

window.addEventListener("hashchange", () => route());
window.addEventListener("DOMContentLoaded", async () => {
  if (!location.hash) history.replaceState(null, "", `${location.search}#timeline`);
  try { await loadCounts(); } catch (err) { toast(`Could not load: ${err.message}`); }
  await route();
  connect();
  performance.mark("panel-ready"); // first view rendered with data (benchmarks/bench_panel.py reads it)
  document.body.dataset.ready = "1";
});
