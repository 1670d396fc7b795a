// convmem inspector: plain JS over the /v1 API. The key lives in sessionStorage only, sent as a Bearer header.

const $ = (id) => document.getElementById(id);
const state = {
  key: "", user: "", session: null, cursor: null,
  turnRequest: 0, openRequest: 0, recallRequest: 0, userRequest: 0,
  turns: new Map(), // seq -> the turn as the API gave it, for the open session (the server keeps them too)
  calls: new Map(), // tool call id -> { anchor, label }: what a tool row links to
  turn: null, // the turn shown
  nextSeq: null, // the slider position to show once the turn on its way is in
  loading: false,
};

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "text") node.textContent = value;
    else if (name === "width") node.style.width = value; // CSSOM, not a style attribute: the CSP allows it
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (value !== undefined && value !== null) node.setAttribute(name, value);
  }
  for (const child of children) node.append(child);
  return node;
}

function say(text, isError = false) {
  const status = $("status");
  status.textContent = text;
  status.classList.toggle("error", isError);
}

async function api(method, path, params = {}, body = undefined) {
  const url = new URL(path, window.location.origin);
  if (state.user) url.searchParams.set("user_id", state.user);
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, value);
  }
  const init = { method, headers: { Authorization: `Bearer ${state.key}` } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(url, init);
  const data = response.status === 204 ? null : await response.json().catch(() => null);
  if (!response.ok) {
    const detail = data && data.detail ? data.detail : `HTTP ${response.status}`;
    const error = new Error(detail);
    error.status = response.status;
    error.problem = data || {};
    throw error;
  }
  return data;
}

// A replay the service is still running (it keeps what it did): show how far it got, ask again shortly.
const pending = (error) => error.status === 503 && String(error.problem.type || "").endsWith("/replay-pending");
const progress = (error) => `replaying this session: seq ${error.problem.replayed_to} of ${error.problem.last_seq}…`;
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function guarded(task) {
  try {
    await task();
  } catch (error) {
    say(error.message, true);
  }
}

// -- sessions ------------------------------------------------------------------------------
async function loadSessions() {
  const query = $("session-search").value.trim();
  const ticket = state.userRequest;
  const data = await api("GET", "/v1/sessions", { q: query, limit: 200 });
  if (ticket !== state.userRequest || query !== $("session-search").value.trim()) return; // a newer list is coming
  const list = $("sessions");
  list.replaceChildren();
  for (const info of data.items) {
    const label = info.title ? `${info.title} · ${info.id}` : info.id;
    const button = el("button", { type: "button", "data-session": info.id, onclick: () => guarded(() => openSession(info.id)) },
      el("span", { class: "session-name", text: label }),
      el("span", { class: "muted", text: `${info.message_count} messages · ${info.tokens} tokens` }));
    if (state.session && state.session.id === info.id) button.setAttribute("aria-current", "true");
    list.append(el("li", {}, button));
  }
  say(data.items.length ? `${data.items.length} session(s)` : "no sessions for this user");
}

async function openSession(id) {
  // Nothing of the previous session may stay on screen under this one's title, whatever fails below.
  const ticket = ++state.openRequest;
  state.turnRequest++;
  state.session = null;
  state.turns = new Map();
  state.calls = new Map();
  state.turn = null;
  for (const button of document.querySelectorAll("#sessions button")) {
    button.toggleAttribute("aria-current", button.dataset.session === id);
  }
  $("detail").hidden = false;
  $("session-title").textContent = id;
  $("session-meta").textContent = "";
  $("messages").replaceChildren();
  $("more-messages").hidden = true;
  $("summaries").replaceChildren();
  delete $("summaries").dataset.loaded;
  $("turn-last").textContent = "–";
  $("turn-slider").disabled = true;
  clearTurn("loading…");
  const detail = await api("GET", `/v1/sessions/${encodeURIComponent(id)}`);
  if (ticket !== state.openRequest) return;
  state.session = detail;
  $("session-title").textContent = detail.title || detail.id;
  const options = detail.options;
  $("session-meta").textContent =
    `${detail.id} · ${detail.model || "no model"} · ${options.strategy || "token_budget"} · budget ${detail.budget}` +
    ` · reserve ${detail.reserved_output} · ${detail.message_count} messages` +
    (detail.parent_id ? ` · fork of ${detail.parent_id} at ${detail.fork_seq}` : "");
  const slider = $("turn-slider");
  const last = Math.max(0, detail.message_count - 1);
  slider.max = String(last);
  slider.value = String(last);
  slider.disabled = detail.message_count === 0;
  if (!detail.message_count) clearTurn("no messages yet");
  $("summaries").replaceChildren(el("li", { class: "muted", text: "the summary history loads next…" }));
  try {
    await Promise.all([loadMessages(true), detail.message_count ? loadTurn(last) : null]);
  } finally {
    // Then the summary history: the first time it replays the whole session, and on a long session it is
    // large (hundreds of summaries); it fills in on its own, after what the open shows.
    if (ticket === state.openRequest) {
      loadSummaries(ticket).catch((error) => {
        if (ticket === state.openRequest) $("summaries").replaceChildren(el("li", { class: "error", text: error.message }));
      });
    }
  }
  if (ticket === state.openRequest) say(`session ${detail.id}`);
}

// -- the turn slider -----------------------------------------------------------------------
const PARTS = [
  ["system", "system", (a) => a.pinned],
  ["blocks", "blocks", (a) => Object.values(a.blocks).reduce((x, y) => x + y, 0)],
  ["summary", "summary", (a) => a.summary],
  ["window", "window", (a) => a.window],
  ["input", "input", (a) => a.input],
  ["overhead", "overhead", (a) => a.overhead],
  ["reserve", "reserve", (a) => a.reserved_output],
  ["free", "free", (a) => Math.max(0, a.free)],
];

function clearTurn(note, isError = false) {
  $("turn-seq").textContent = "–";
  $("account-bar").replaceChildren();
  $("account-bar").removeAttribute("data-seq");
  $("account-numbers").replaceChildren();
  $("left-out").replaceChildren();
  $("context-json").textContent = "";
  $("turn-notes").textContent = note;
  $("turn-notes").classList.toggle("error", isError);
}

function scheduleTurn() {
  const seq = Number($("turn-slider").value);
  $("turn-seq").textContent = String(seq);
  // At once when nothing is on its way; while a turn loads, only the newest position is asked next
  // (a slider dragged over many positions asks for few of them, and always ends on the last).
  state.nextSeq = seq;
  if (!state.loading) drainTurns();
}

async function drainTurns() {
  state.loading = true;
  try {
    while (state.nextSeq !== null) {
      const seq = state.nextSeq;
      state.nextSeq = null;
      await guarded(() => loadTurn(seq));
    }
  } finally {
    state.loading = false;
  }
}

async function loadTurn(seq) {
  const ticket = ++state.turnRequest;
  const session = state.session;
  let turn = state.turns.get(seq);
  while (!turn) {
    try {
      turn = await api("GET", `/v1/sessions/${encodeURIComponent(session.id)}/turns/${seq}`);
    } catch (error) {
      if (ticket !== state.turnRequest) return;
      if (pending(error)) {
        clearTurn(progress(error));
        await pause(300);
        if (ticket !== state.turnRequest || state.nextSeq !== null) return; // the slider moved on: ask for that
        continue;
      }
      // A failed turn shows its error, never the account of another turn (or session) beside this one's seq.
      clearTurn(`turn ${seq}: ${error.message}`, true);
      throw error;
    }
    if (state.session === session) state.turns.set(seq, turn);
  }
  if (ticket !== state.turnRequest) return; // a newer slider position (or another session) is on its way
  showTurn(turn);
}

function showTurn(turn) {
  state.turn = turn;
  const account = turn.context.account;
  $("turn-seq").textContent = String(turn.seq);
  $("turn-last").textContent = String(turn.last_seq);
  $("turn-slider").max = String(turn.last_seq);
  $("turn-notes").classList.remove("error");
  const bar = $("account-bar");
  const numbers = $("account-numbers");
  bar.replaceChildren();
  numbers.replaceChildren();
  for (const [part, label, pick] of PARTS) {
    const tokens = pick(account);
    const width = account.budget ? (100 * tokens) / account.budget : 0;
    if (tokens > 0) {
      bar.append(el("span", { class: `part part-${part}`, width: `${width}%`, title: `${label}: ${tokens}` }));
    }
    numbers.append(el("div", { class: `legend part-${part}` },
      el("dt", { text: label }), el("dd", { "data-part": part, text: String(tokens) })));
  }
  numbers.append(el("div", { class: "legend" }, el("dt", { text: "budget" }),
    el("dd", { "data-part": "budget", text: String(account.budget) })));
  const blocks = Object.entries(account.blocks).map(([name, tokens]) => `${name} ${tokens}`).join(", ");
  bar.setAttribute("aria-label", `Token account at turn ${turn.seq}: ${PARTS.map(([p, l, f]) => `${l} ${f(account)}`).join(", ")}`);
  $("turn-notes").textContent = [
    turn.exact ? "replayed exactly" : "replay is approximate",
    ...turn.notes,
    blocks ? `blocks: ${blocks}` : "",
    account.exact ? `counter ${account.counter}` : `approximate counter ${account.counter}`,
  ].filter(Boolean).join(" · ");
  const left = $("left-out");
  left.replaceChildren();
  for (const item of turn.context.left_out) {
    const range = item.first_seq === null ? "" : ` (seq ${item.first_seq}–${item.last_seq})`;
    left.append(el("li", { "data-reason": item.reason },
      el("strong", { text: item.reason }),
      ` ${item.messages} message(s), ${item.tokens} tokens${range}: ${item.detail}`));
  }
  if (!turn.context.left_out.length) left.append(el("li", { class: "muted", text: "nothing: the whole history fits" }));
  $("context-json").textContent = JSON.stringify(turn.context.request, null, 2);
  for (const row of document.querySelectorAll("#messages li")) markStatus(row, turn);
  bar.setAttribute("data-seq", String(turn.seq)); // last: tests and scripts wait on it for the whole view
}

// A message's status at the shown turn, from that turn's context: its ranges of what was left out, and why.
function statusAt(seq, role, turn) {
  if (seq > turn.seq) return "future";
  if (role === "system" || role === "developer") return "pinned";
  const ranges = turn.context.left_out.filter((x) => x.first_seq !== null && seq >= x.first_seq && seq <= x.last_seq);
  if (ranges.some((x) => x.reason === "summarized")) return "summarized";
  if (ranges.some((x) => x.reason === "archived")) return "archived";
  return "active";
}

function markStatus(row, turn) {
  const status = turn ? statusAt(Number(row.dataset.seq), row.dataset.role, turn) : row.dataset.status;
  row.dataset.statusAt = status;
  row.classList.toggle("future", status === "future");
  const badge = row.querySelector(".badge");
  badge.className = `badge status-${status}`;
  badge.textContent = STATUS_LABEL[status] || status;
  badge.title = `at turn ${turn ? turn.seq : "now"}; now: ${STATUS_LABEL[row.dataset.status] || row.dataset.status}`;
}

// -- conversation, summaries ---------------------------------------------------------------
function contentText(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((part) => part.text || `[${part.type}]`).join(" ");
  return "";
}

// A message's body: its text and its tool calls (both, when an assistant says something and calls tools),
// or for a tool result, a link to the call it answers.
function messageBody(message, seq) {
  const body = [];
  const text = contentText(message.content);
  if (text) body.push(el("p", { class: "text", text }));
  (message.tool_calls || []).forEach((call, index) => {
    const anchor = `call-${seq}-${index}`;
    state.calls.set(call.id, { anchor, label: `${call.name} (#${seq})` });
    body.push(el("p", { class: "tool-call", id: anchor, "data-call": call.id },
      el("span", { class: "muted", text: "calls " }), el("code", { text: `${call.name}(${call.arguments})` })));
  });
  if (message.role === "tool" && message.tool_call_id) {
    const call = state.calls.get(message.tool_call_id);
    const answers = call
      ? el("a", { href: `#${call.anchor}`, class: "answers", text: call.label })
      : el("code", { text: message.tool_call_id });
    body.unshift(el("p", { class: "tool-answer muted" }, "answers ", answers));
  }
  return body;
}

const STATUS_LABEL = {
  active: "window", archived: "archived", summarized: "summarized", pinned: "pinned", cleared: "cleared", future: "not yet",
};

async function loadMessages(reset) {
  const session = state.session;
  if (reset) {
    state.cursor = 0;
    $("messages").replaceChildren();
  }
  const status = $("status-filter").value;
  const page = await api("GET", `/v1/sessions/${encodeURIComponent(session.id)}/messages`,
    { status, cursor: state.cursor, limit: 200 });
  if (state.session !== session) return;
  for (const item of page.items) {
    const message = item.message;
    const jump = el("button", { type: "button", class: "seq", text: `#${item.seq}`, "aria-label": `Show the context at turn ${item.seq}`,
      onclick: () => { $("turn-slider").value = String(item.seq); scheduleTurn(); $("turn-slider").focus(); } });
    const row = el("li", { "data-seq": String(item.seq), "data-status": item.status, "data-role": message.role },
      jump,
      el("span", { class: `badge status-${item.status}`, text: STATUS_LABEL[item.status] || item.status }),
      el("span", { class: "role", text: message.role }),
      el("span", { class: "muted", text: `${item.tokens} tok` }),
      el("div", { class: "body" }, ...messageBody(message, item.seq)));
    markStatus(row, state.turn);
    $("messages").append(row);
  }
  state.cursor = page.next_cursor;
  $("more-messages").hidden = page.next_cursor === null;
}

async function loadSummaries(ticket) {
  const list = $("summaries");
  list.replaceChildren(el("li", { class: "muted", text: "rebuilding the summary history…" }));
  const session = state.session;
  let steps = null;
  while (steps === null) {
    try {
      steps = await api("GET", `/v1/sessions/${encodeURIComponent(session.id)}/summaries`);
    } catch (error) {
      if (ticket !== state.openRequest || !pending(error)) throw error;
      list.replaceChildren(el("li", { class: "muted", text: `rebuilding the summary history: ${progress(error)}` }));
      await pause(300);
      if (ticket !== state.openRequest) return;
    }
  }
  if (ticket !== state.openRequest) return;
  list.replaceChildren();
  for (const step of steps) {
    list.append(el("li", {},
      el("span", { class: "muted", text: `after #${step.after_seq}: covers seq ${step.first_seq}–${step.last_seq}, ${step.tokens} tokens` }),
      el("p", { class: "text", text: step.text })));
  }
  if (!steps.length) list.append(el("li", { class: "muted", text: "no summary yet" }));
  list.dataset.loaded = "true";
}

// -- facts, recall -------------------------------------------------------------------------
async function loadFacts() {
  const ticket = state.userRequest;
  const facts = await api("GET", "/v1/facts", { history: "true" });
  if (ticket !== state.userRequest) return;
  const byId = Object.fromEntries(facts.map((fact) => [fact.id, fact]));
  const list = $("facts");
  list.replaceChildren();
  for (const fact of facts) {
    const when = (stamp) => stamp.slice(0, 16).replace("T", " ");
    const until = fact.valid_to ? `until ${when(fact.valid_to)}` : "still valid";
    const replaced = fact.replaced_by && byId[fact.replaced_by] ? ` → replaced by “${byId[fact.replaced_by].text}”` : "";
    const reason = fact.invalid_reason ? ` (${fact.invalid_reason})` : "";
    list.append(el("li", { class: fact.valid_to ? "ended" : "open", "data-fact": fact.id },
      el("p", { class: "text", text: fact.text }),
      el("span", { class: "muted", text: `${fact.subject ? fact.subject + " · " : ""}from ${when(fact.valid_from)} ${until}${reason}${replaced}` })));
  }
  if (!facts.length) list.append(el("li", { class: "muted", text: "no facts for this user" }));
}

function clearRecall(note = "", isError = false) {
  $("recall-results").querySelector("tbody").replaceChildren();
  $("recall-error").textContent = note;
  $("recall-error").hidden = !note;
  $("recall-error").classList.toggle("error", isError);
}

async function search(event) {
  event.preventDefault();
  const ticket = ++state.recallRequest;
  clearRecall(); // old results never stand beside a new query's outcome
  const body = { query: $("recall-query").value, k: 10 };
  if ($("recall-mode").value) body.mode = $("recall-mode").value;
  let found;
  try {
    found = await api("POST", "/v1/recall", {}, body);
  } catch (error) {
    if (ticket === state.recallRequest) clearRecall(`recall failed: ${error.message}`, true);
    throw error;
  }
  if (ticket !== state.recallRequest) return; // another search, or another user, since
  const rows = $("recall-results").querySelector("tbody");
  const signal = (s) => (s.rank === null ? "–" : s.score === null || s.score === undefined ? `#${s.rank}` : `#${s.rank} (${Number(s.score).toFixed(3)})`);
  for (const hit of found.items) {
    rows.append(el("tr", {},
      el("td", { text: hit.score.toFixed(3) }),
      el("td", {}, el("span", { class: "signal", text: `lex ${signal(hit.signals.lexical)}` }),
        el("span", { class: "signal", text: `dense ${signal(hit.signals.dense)}` })),
      el("td", {}, el("span", { class: "clamp" },
        el("span", { class: "muted", text: `${hit.session_id} #${hit.seq} ${hit.role}: ` }), hit.text),
        el("span", { class: "muted reason", text: hit.reason }))));
  }
  if (!found.items.length) clearRecall("nothing found");
  say(`${found.items.length} result(s), ${found.mode} recall`);
}

async function loadModes(ticket) {
  // Only the modes this service can serve: dense and hybrid need an embedder.
  const select = $("recall-mode");
  const found = await api("GET", "/v1/recall/modes");
  if (ticket !== state.userRequest) return;
  select.replaceChildren(el("option", { value: "", text: `default (${found.default})` }),
    ...found.modes.map((mode) => el("option", { value: mode, text: mode })));
}

// -- wiring --------------------------------------------------------------------------------
async function connect(event) {
  if (event) event.preventDefault();
  state.key = $("api-key").value.trim();
  state.user = $("user-id").value.trim();
  sessionStorage.setItem("convmem.key", state.key);
  sessionStorage.setItem("convmem.user", state.user);
  state.session = null;
  state.openRequest++;
  state.turnRequest++;
  state.recallRequest++; // a search still on its way was the previous user's
  const ticket = ++state.userRequest;
  $("detail").hidden = true;
  clearRecall();
  $("facts").replaceChildren();
  await Promise.all([loadSessions(), loadFacts(), loadModes(ticket)]);
}

function init() {
  $("connect").addEventListener("submit", (event) => guarded(() => connect(event)));
  let searchTimer = null;
  $("session-search").addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => guarded(loadSessions), 150);
  });
  $("turn-slider").addEventListener("input", scheduleTurn);
  $("status-filter").addEventListener("change", () => guarded(() => loadMessages(true)));
  $("more-messages").addEventListener("click", () => guarded(() => loadMessages(false)));
  $("recall-form").addEventListener("submit", (event) => guarded(() => search(event)));
  document.addEventListener("keydown", (event) => {
    if (event.key === "/" && !["INPUT", "SELECT", "TEXTAREA"].includes(document.activeElement.tagName)) {
      event.preventDefault();
      $("session-search").focus();
    }
  });
  const key = sessionStorage.getItem("convmem.key");
  if (key) {
    $("api-key").value = key;
    $("user-id").value = sessionStorage.getItem("convmem.user") || "";
    guarded(() => connect());
  }
}

init();
