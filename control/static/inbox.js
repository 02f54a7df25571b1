// hookyard inbox page: the live list of one endpoint's captured requests and their detail.
//
// Everything captured is hostile data: it reaches the document only as text (textContent, text nodes,
// element properties), never as markup: no HTML is ever parsed from a string here, and the page's CSP allows
// scripts from this origin only. Data comes from /inbox/{id}/events... (the /v1 service functions behind
// the page's cookie); new events are announced on /inbox/{id}/stream (server-sent events).
"use strict";

(() => {
  const endpointId = document.body.dataset.endpoint;
  const ingestUrl = document.body.dataset.ingest || "";
  const temporary = document.body.dataset.temporary === "true";
  const base = `/inbox/${encodeURIComponent(endpointId)}`;
  const PAGE = 50;
  const LIVE = 10;

  const state = {
    events: new Map(), cursor: null, selected: null, loading: false, again: null, filterKey: "", pending: new Set(),
    replayUrl: "", // the URL last replayed to from this page; else the endpoint's replay target (below)
  };

  // -- DOM helpers: text only ------------------------------------------------------------------------
  function h(tag, props, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "dataset") Object.assign(el.dataset, value);
      else if (key === "on") for (const [ev, fn] of Object.entries(value)) el.addEventListener(ev, fn);
      else el[key] = value;
    }
    append(el, children);
    return el;
  }
  function append(el, children) {
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
  }
  function clear(el) { while (el.firstChild) el.firstChild.remove(); }
  const status = document.getElementById("status");
  function say(text, kind) { status.textContent = text; status.className = kind || ""; }

  // The clipboard where the browser allows it (a secure context: https, or localhost); else the text is
  // selected for Ctrl+C. The label says which happened, then comes back.
  function copyButton(id, label, text, box) {
    const button = h("button", { type: "button", id, className: "copy", on: { click: async () => {
      try { await navigator.clipboard.writeText(text); button.textContent = "copied"; } catch (_) {
        const range = document.createRange(); range.selectNodeContents(box);
        getSelection().removeAllRanges(); getSelection().addRange(range); button.textContent = "selected: press Ctrl+C";
      }
      setTimeout(() => { button.textContent = label; }, 2000);
    } } }, label);
    return button;
  }
  const ingestCode = document.getElementById("ingest-url");
  if (ingestCode) ingestCode.after(" ", copyButton("copy-ingest", "copy", ingestUrl, ingestCode));

  // -- data ------------------------------------------------------------------------------------------
  async function api(path, options) {
    const resp = await fetch(base + path, { credentials: "same-origin", cache: "no-store", ...options });
    if (!resp.ok) {
      let message = `HTTP ${resp.status}`;
      try {
        const body = await resp.json();
        if (body && body.error) message = `${body.error.code}: ${body.error.message}`;
      } catch (_) { /* not the envelope */ }
      const error = new Error(message);
      error.status = resp.status;
      throw error;
    }
    return resp.json();
  }

  function filterQuery() {
    const params = new URLSearchParams();
    const q = form.q.value.trim(), type = form.type.value.trim();
    if (q) params.set("q", q);
    if (form.provider.value) params.set("provider", form.provider.value);
    if (type) params.set("type", type);
    if (form.signature.value) params.set("signature_valid", form.signature.value);
    return params;
  }

  function bytes(text, encoding) {
    if (text === null || text === undefined) return new Uint8Array(0);
    if (encoding === "base64") return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
    return new TextEncoder().encode(text);
  }
  function toBase64(data) {
    let binary = "";
    for (let i = 0; i < data.length; i += 0x8000) binary += String.fromCharCode(...data.subarray(i, i + 0x8000));
    return btoa(binary);
  }
  function size(n) {
    if (n < 1024) return `${n} B`;
    if (n < 1048576) return `${(n / 1024).toFixed(1)} KiB`;
    return `${(n / 1048576).toFixed(1)} MiB`;
  }
  function when(iso) {
    const d = new Date(iso);
    return Number.isNaN(d.getTime()) ? iso : d.toLocaleString(undefined, { hour12: false });
  }
  function verdict(valid, reason) {
    // The same words as `hookyard tail` and `hookyard up` (control/records/verdict.py).
    if (valid === true) return h("span", { className: "verdict ok" }, "verified");
    if (valid === false) return h("span", { className: "verdict bad", title: reason || "" }, "invalid", reason ? `: ${reason}` : "");
    return h("span", { className: "verdict none" }, "not checked");
  }
  function labelChips(labels) {
    return (labels || []).map((label) => {
      const chip = h("span", { className: "label" }, `${label.key}: ${label.value}`);
      if (/^#[0-9a-fA-F]{6}$/.test(label.color || "")) {
        chip.style.borderColor = label.color;
        chip.style.backgroundColor = `${label.color}22`;
      }
      return chip;
    });
  }

  // -- the list --------------------------------------------------------------------------------------
  const main = document.querySelector("main");
  const form = h("form", { className: "filters", role: "search", on: { submit: (e) => e.preventDefault() } });
  append(form, [
    h("input", { name: "q", type: "search", placeholder: "search body, path, query, headers…", ariaLabel: "search" }),
    h("select", { name: "provider", ariaLabel: "provider" },
      h("option", { value: "" }, "any provider"),
      JSON.parse(document.body.dataset.providers || "[]").map((p) => h("option", { value: p }, p))),
    h("input", { name: "type", placeholder: "event type", ariaLabel: "event type" }),
    h("select", { name: "signature", ariaLabel: "signature" },
      h("option", { value: "" }, "any signature"),
      h("option", { value: "true" }, "valid"),
      h("option", { value: "false" }, "invalid")),
  ]);
  const list = h("ol", { id: "events", className: "events" });
  const older = h("button", { type: "button", id: "older", hidden: true, on: { click: () => loadOlder() } }, "older events");
  const count = h("h2", { id: "count", className: "count" }, "0 events");
  // The empty page says how to fill it: a request to paste into a shell (quoted by curl.js, as "copy as
  // curl" is) and the CLI's signed sample of a provider's event.
  const sampleCurl = hookyardCurl.curlCommand(ingestUrl, {
    method: "POST", path: "/", query: "", headers: { "content-type": "application/json" },
    body: '{"type": "hello.world", "message": "hello from curl"}', body_encoding: "utf8",
  });
  const sampleTrigger = `hookyard trigger payments payment_intent.succeeded --endpoint ${endpointId}`;
  const curlSample = h("pre", { className: "curl", id: "sample-curl" }, sampleCurl);
  const triggerSample = h("pre", { className: "curl", id: "sample-trigger" }, sampleTrigger);
  const emptyText = h("p", { className: "empty" });
  const samples = h("div", { id: "samples" },
    h("p", {}, "Send one from a shell: ", copyButton("copy-sample-curl", "copy", sampleCurl, curlSample)), curlSample,
    h("p", {}, "or a signed sample of a provider's event with hookyard's CLI: ",
      copyButton("copy-sample-trigger", "copy", sampleTrigger, triggerSample)), triggerSample,
    temporary ? h("p", { className: "hint", id: "sample-token" }, "The CLI takes the api_token POST /api/start "
      + "answered (hy_tmp_…) as HOOKYARD_API_KEY; an agent holding it sends one with the MCP tool "
      + "send_test_webhook.") : null);
  const empty = h("div", { id: "empty", hidden: true }, emptyText, samples);
  const detail = h("section", { id: "detail", className: "detail" },
    h("p", { className: "empty" }, "Select an event to see its headers, body and deliveries."));
  main.append(h("div", { className: "columns" }, h("section", { className: "list" }, count, form, empty, list, older), detail));

  let debounce = null;
  form.addEventListener("input", () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => refresh("reset"), 250);
  });

  function ordered() {
    return [...state.events.values()].sort((a, b) =>
      a.received_at < b.received_at ? 1 : a.received_at > b.received_at ? -1 : a.id < b.id ? 1 : -1);
  }

  function row(event, fresh) {
    const where = event.path || "/"; // stored with its leading slash
    const li = h("li", {
      className: `event${fresh ? " new" : ""}${state.selected === event.id ? " selected" : ""}`,
      tabIndex: 0, dataset: { id: event.id },
      on: { click: () => select(event.id), keydown: (e) => { if (e.key === "Enter") select(event.id); } },
    },
    h("span", { className: "method" }, event.method),
    h("span", { className: "path" }, where + (event.query ? `?${event.query}` : "")),
    h("time", { className: "time", dateTime: event.received_at }, when(event.received_at)),
    h("span", { className: "sub" },
      h("span", { className: "provider" }, event.provider || "unattributed"),
      event.event_type ? h("span", { className: "type" }, event.event_type) : null,
      event.handshake ? h("span", { className: "handshake", title: "answered at the edge, never delivered" }, "handshake") : null,
      verdict(event.signature_valid, event.signature_failure_reason),
      h("span", { className: "source", title: "source address" }, event.source_ip || "unknown source"),
      h("span", { className: "size" }, size(event.size))),
    event.labels.length ? h("span", { className: "labels" }, labelChips(event.labels)) : null);
    return li;
  }

  function selectNewest() {
    const newest = ordered()[0];
    if (newest && state.selected === null) select(newest.id);
  }

  function draw(freshIds) {
    clear(list);
    for (const event of ordered()) list.append(row(event, freshIds.has(event.id)));
    const n = state.events.size, filtered = state.filterKey !== "";
    empty.hidden = n > 0;
    list.hidden = n === 0; // no empty bordered box under the samples
    emptyText.textContent = filtered ? "No events match these filters."
      : "No events yet. Send a request to the ingest URL; it appears here as it arrives.";
    samples.hidden = filtered;
    older.hidden = !state.cursor;
    // What is listed; "+" while older pages are not loaded (the list API pages, it does not count).
    const shown = `${n}${state.cursor ? "+" : ""}`;
    count.textContent = `${shown} ${n === 1 && !state.cursor ? "event" : "events"}${filtered ? " match" : ""}`;
    document.title = `(${shown}) hookyard inbox`;
  }

  // "reset" (first load, filters changed) replaces the list with the newest PAGE events and remembers where
  // older ones continue; "sync" (the stream is (re)connected: anything may have been missed) merges the newest
  // PAGE; "live" asks for the newest LIVE events and pages on only while an announced id is still unseen.
  // Announced ids, not "a whole page is new", decide: commits are not in received_at order across shards,
  // so an event committed late can sit below events already listed. An id that never shows (it does not
  // match the filters) costs at most PAGE events read.
  const rank = { live: 0, sync: 1, reset: 2 };
  async function refresh(mode) {
    if (state.loading) {
      if (!state.again || rank[mode] > rank[state.again]) state.again = mode;
      return;
    }
    state.loading = true;
    try {
      const key = filterQuery().toString();
      if (key !== state.filterKey || state.events.size === 0) mode = "reset";
      const wanted = state.pending;
      state.pending = new Set();
      const params = filterQuery();
      params.set("limit", String(mode === "live" ? LIVE : PAGE));
      let page = await api(`/events?${params}`);
      const fresh = new Set();
      if (mode === "reset") {
        state.events.clear();
        state.cursor = page.next_cursor;
        state.filterKey = key;
      }
      for (let pages = 1; ; pages++) {
        for (const event of page.events) {
          if (mode !== "reset" && !state.events.has(event.id)) fresh.add(event.id);
          state.events.set(event.id, event);
          wanted.delete(event.id);
        }
        if (mode !== "live" || !wanted.size || !page.next_cursor || pages >= PAGE / LIVE) break;
        params.set("cursor", page.next_cursor);
        page = await api(`/events?${params}`);
      }
      draw(fresh);
      say("live", "live");
      if (mode === "live") selectNewest(); // the first event into a page that had none
    } catch (error) {
      say(error.message, "error");
    } finally {
      state.loading = false;
      if (state.again) { const next = state.again; state.again = null; refresh(next); }
    }
  }

  async function loadOlder() {
    if (!state.cursor) return;
    const params = filterQuery();
    params.set("limit", String(PAGE));
    params.set("cursor", state.cursor);
    try {
      const page = await api(`/events?${params}`);
      for (const event of page.events) state.events.set(event.id, event);
      state.cursor = page.next_cursor;
      draw(new Set());
    } catch (error) {
      say(error.message, "error");
    }
  }

  // -- live ------------------------------------------------------------------------------------------
  function connect() {
    const source = new EventSource(`${base}/stream`);
    source.addEventListener("sync", () => refresh("sync"));
    source.addEventListener("events", (message) => {
      for (const id of message.data.split(",")) if (id) state.pending.add(id);
      refresh("live");
    });
    source.addEventListener("error", () => {
      if (source.readyState !== EventSource.CLOSED) { say("reconnecting…", "warn"); return; }
      // Refused (an expired link cookie, the endpoint gone): a plain request says why.
      api("/events?limit=1").then(() => setTimeout(connect, 2000), (error) => {
        say(error.status === 401 ? `${error.message} (open a new inbox link)` : error.message, "error");
        if (error.status !== 401 && error.status !== 404) setTimeout(connect, 5000);
      });
    });
  }

  // -- the detail ------------------------------------------------------------------------------------
  function table(rows, headings) { // in a box that scrolls sideways when whole headings do not fit
    return h("div", { className: "table" }, h("table", {},
      h("thead", {}, h("tr", {}, headings.map((name) => h("th", { scope: "col" }, name)))),
      h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((cell) => h("td", {}, cell)))))));
  }

  function bodyViews(event) {
    const raw = bytes(event.body, event.body_encoding);
    const views = [];
    if (event.body !== null && event.body_encoding === "utf8") {
      // The body's own text, indented and coloured (pretty.js): never a value parsed and printed again,
      // which would show `48` for `48.0`. Not JSON: no pretty view.
      const pretty = hookyardPretty.render(event.body);
      if (pretty !== null) views.push(["pretty", pretty, "pretty"]);
      views.push(["raw", event.body]);
    } else if (event.body !== null) {
      views.push(["raw", hookyardHex.hexDump(raw), "hex"]); // not UTF-8 text: its bytes, as hexdump -C shows them
    }
    views.push(["base64", toBase64(raw)]);
    const pre = h("pre", { className: "body", id: "body-view" });
    const tabs = h("div", { className: "tabs", role: "tablist" });
    const show = (name, text, kind) => {
      if (typeof text === "string") pre.textContent = text;
      else pre.replaceChildren(text.cloneNode(true)); // a fragment empties itself when appended: keep the original
      pre.className = kind ? `body ${kind}` : "body";
      for (const tab of tabs.children) tab.setAttribute("aria-selected", String(tab.dataset.view === name));
    };
    for (const [name, text, kind] of views) {
      tabs.append(h("button", { type: "button", role: "tab", dataset: { view: name }, on: { click: () => show(name, text, kind) } }, name));
    }
    show(...views[0]);
    const download = h("a", { href: `${base}/events/${encodeURIComponent(event.id)}/body`, download: "", className: "download" },
      `download raw body (${size(raw.length)})`);
    return [h("h3", {}, "Body"), tabs, pre, download];
  }

  // Whether the attempt is tried again (the record's `retry`, docs/reference/delivery.md): a failed attempt
  // whose retry is scheduled is not the delivery's end, so the row says when the next one is due.
  const RETRY = { in_flight: "retrying now", held: "held: destination disabled", gave_up: "gave up" };
  function outcome(d) {
    const text = d.success ? "ok" : (d.error || "failed");
    let mark = RETRY[d.retry];
    if (d.retry === "scheduled" && d.next_attempt_at) {
      mark = `retry at ${new Date(d.next_attempt_at).toLocaleTimeString(undefined, { hour12: false })}`;
    }
    return mark ? [text, " ", h("span", { className: `retry ${d.retry}` }, mark)] : text;
  }

  function deliveries(event) {
    if (!event.deliveries.length) return [h("h3", {}, "Deliveries"), h("p", { className: "empty" }, "No delivery attempts.")];
    const rows = event.deliveries.map((d) => [
      when(d.created_at), d.source, `#${d.attempt_number}`, d.destination_name || d.destination_url || "",
      d.response_status === null ? "no response" : String(d.response_status),
      d.latency_ms === null ? "" : `${d.latency_ms} ms`,
      outcome(d),
      d.span_id || "",
    ]);
    return [h("h3", {}, "Deliveries"), table(rows, ["time", "source", "attempt", "destination", "status", "latency", "outcome", "span"])];
  }

  function replayForm(event) {
    const url = h("input", { name: "url", type: "url", required: true, placeholder: "https://example.com/webhooks", ariaLabel: "replay URL", value: state.replayUrl });
    if (!state.replayUrl) { // where listen forwards, or where the last replay went (the endpoint's replay target)
      api("/replay-target").then((target) => {
        if (target.url && !url.value && !state.replayUrl) url.value = target.url;
      }, () => { /* no hint: the box stays empty */ });
    }
    const resign = h("input", { name: "resign", type: "checkbox" });
    const secret = h("input", { name: "secret", type: "password", placeholder: "signing secret (16+ chars)", ariaLabel: "signing secret", autocomplete: "off" });
    const own = hookyardResign.ownHeader(event); // where the server re-signs when no header is named
    const header = h("input", { name: "signature_header", placeholder: own, title: `default: ${own}`, ariaLabel: "signature header" });
    const outcome = h("div", { className: "outcome", id: "replay-outcome", role: "status" });
    const send = h("button", { type: "submit" }, "Replay");
    const formEl = h("form", { className: "replay", on: { submit: async (e) => {
      e.preventDefault();
      const request = { url: url.value.trim() };
      state.replayUrl = request.url;
      if (resign.checked) {
        request.resign_with = secret.value;
        if (header.value.trim()) request.signature_header = header.value.trim(); // else the event's own (above)
      }
      send.disabled = true;
      outcome.textContent = "sending…";
      try {
        const result = await api(`/events/${encodeURIComponent(event.id)}/replay`, {
          method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(request),
        });
        clear(outcome);
        outcome.className = `outcome ${result.success ? "ok" : "bad"}`;
        append(outcome, [
          h("strong", {}, result.success ? "delivered" : "failed"), " · ",
          result.status === null ? "no response" : `HTTP ${result.status}`, ` · ${result.latency_ms} ms`,
          result.error ? h("div", {}, result.error) : null,
          result.response_body ? h("pre", { className: "body" }, result.response_body) : null,
        ]);
        const again = await api(`/events/${encodeURIComponent(event.id)}`);
        const old = detail.querySelector(".deliveries");
        if (old && state.selected === event.id) { clear(old); append(old, deliveries(again)); }
      } catch (error) {
        outcome.className = "outcome bad";
        outcome.textContent = error.message;
      } finally {
        send.disabled = false;
      }
    } } },
    h("label", {}, "URL ", url),
    h("label", {}, resign, " re-sign with ", secret, " in header ", header),
    send, outcome);
    return [h("h3", {}, "Replay"), formEl];
  }

  async function select(id) {
    state.selected = id;
    for (const li of list.children) li.classList.toggle("selected", li.dataset.id === id);
    if (location.hash !== `#${id}`) history.replaceState(null, "", `#${id}`);
    clear(detail);
    detail.append(h("p", { className: "empty" }, "loading…"));
    let event;
    try {
      event = await api(`/events/${encodeURIComponent(id)}`);
    } catch (error) {
      clear(detail);
      detail.append(h("p", { className: "error" }, error.message));
      return;
    }
    if (state.selected !== id) return;
    clear(detail);
    const allow = event.ip_allowed === true ? "allowed by the allowlist"
      : event.ip_allowed === false ? "NOT on the allowlist" : "no allowlist";
    const summary = [
      ["id", event.id], ["received", when(event.received_at)], ["request", `${event.method} ${event.path || "/"}`],
      ["provider", event.provider || "unattributed"], ["type", event.event_type || ""],
      ["handshake", event.handshake ? "yes: answered at the edge, never delivered" : "no"],
      ["signature", verdict(event.signature_valid, event.signature_failure_reason)],
      ["source IP", `${event.source_ip || "unknown"} · ${allow}`], ["content type", event.content_type || ""],
      ["idempotency key", event.idempotency_key || ""], ["labels", h("span", {}, labelChips(event.labels))],
      ["trace", h("code", { id: "trace-id" }, event.trace_id || "not traced")],
    ];
    const dl = h("dl", { className: "summary" }, summary.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
    const headerRows = Object.entries(event.headers).map(([name, value]) =>
      [name, event.header_encodings[name] ? `${value} (base64)` : value]);
    const queryRows = event.query ? [...new URLSearchParams(event.query)].map(([k, v]) => [k, v]) : [];
    const command = hookyardCurl.curlCommand(ingestUrl, event);
    const curlBox = h("pre", { className: "curl", id: "curl" }, command);
    const copy = copyButton("copy-curl", "copy as curl", command, curlBox);
    append(detail, [
      h("h2", {}, `${event.method} `, h("span", { className: "path" }, event.path || "/")), dl,
      h("h3", {}, "Headers"), table(headerRows, ["name", "value"]),
      h("h3", {}, "Query"), queryRows.length ? table(queryRows, ["name", "value"]) : h("p", { className: "empty" }, "none"),
      bodyViews(event),
      h("div", { className: "deliveries" }, deliveries(event)),
      h("h3", {}, "Copy as curl"), copy, curlBox,
      replayForm(event),
    ]);
  }

  // Opened on the event its address names, else on the newest: the page never opens on an empty detail
  // while there are events (and the first event to arrive into an empty page is shown too, in draw).
  const named = () => (/^evt_[0-9A-Za-z]+$/.test(location.hash.slice(1)) ? location.hash.slice(1) : null);
  refresh("reset").then(() => (named() ? select(named()) : selectNewest()));
  // An event's address pasted into the open page (or Back to one) shows that event too: only a load read it.
  window.addEventListener("hashchange", () => { if (named() && named() !== state.selected) select(named()); });
  connect();
})();
