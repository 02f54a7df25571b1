// hookyard inbox page: the transform editor under the event shown. A dry run of handler(request, context) on
// that event (POST /inbox/{id}/events/{event}/transform: runs in hookyard's sandbox, sends nothing) and a
// replay through the transform to a URL (the page's replay route with `transform`).
//
// Its own file beside inbox.js: it watches the detail pane and adds itself to each event shown, so the list
// and detail code need not know it. What comes back (the returned request, logs, errors) is hostile data
// like everything captured: text only, never markup.
"use strict";

(() => {
  const endpointId = document.body.dataset.endpoint;
  const base = `/inbox/${encodeURIComponent(endpointId)}`;
  const TEMPLATE = [
    "// Runs for every delivery (here: on this event, nothing is sent).",
    "// Return the request to send, any field changed, or null to skip.",
    "function handler(request, context) {",
    "  return request;",
    "}",
    "",
  ].join("\n");
  let source = TEMPLATE;  // kept while moving between events

  function h(tag, props, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "on") for (const [ev, fn] of Object.entries(value)) el.addEventListener(ev, fn);
      else el[key] = value;
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  async function post(path, body) {
    const resp = await fetch(base + path, {
      method: "POST", credentials: "same-origin", cache: "no-store",
      headers: { "content-type": "application/json" }, body: JSON.stringify(body),
    });
    const data = await resp.json().catch(() => null);
    if (!resp.ok) {
      const error = data && data.error ? `${data.error.code}: ${data.error.message}` : `HTTP ${resp.status}`;
      throw new Error(error);
    }
    return data;
  }

  function errorText(error) {
    return error.line === null || error.line === undefined ? error.message : `line ${error.line}: ${error.message}`;
  }

  function logs(lines, truncated) {
    if (!lines || !lines.length) return null;
    return [h("div", { className: "transform-label" }, "console"),
      h("pre", { className: "body transform-logs" }, lines.join("\n") + (truncated ? "\n… (more logs dropped: 4 KB kept)" : ""))];
  }

  function editor(eventId) {
    const code = h("textarea", {
      className: "transform-source", id: "transform-source", spellcheck: false, rows: 10, value: source,
      ariaLabel: "transform source", on: { input: () => {
        source = code.value;
        // Typed into an editor the detail pane's redraw has just replaced: the one now shown takes the text,
        // so that what Run sends is what the page shows (a redraw landing mid-typing showed the template).
        const live = document.getElementById("transform-source");
        if (live && live !== code) live.value = source;
      } },
    });
    const result = h("div", { className: "transform-result", id: "transform-result", role: "status" });
    const run = h("button", { type: "button", id: "transform-run" }, "Run on this event");
    const url = h("input", { type: "url", placeholder: "https://example.com/webhooks", ariaLabel: "where to send the transformed event" });
    const replay = h("button", { type: "button", id: "transform-replay" }, "Send through transform");

    const show = (...children) => { result.replaceChildren(...children.flat().filter(Boolean)); };
    run.addEventListener("click", async () => {
      run.disabled = true;
      show(h("span", {}, "running…"));
      try {
        const out = await post(`/events/${encodeURIComponent(eventId)}/transform`, { transform: code.value });
        const took = h("span", { className: "transform-took" }, ` · ${out.duration_ms.toFixed(2)} ms`);
        if (out.error) {
          show(h("div", { className: "transform-error" }, h("strong", {}, "error"), " ", errorText(out.error), took),
            logs(out.logs, out.logs_truncated));
        } else if (out.skipped) {
          show(h("div", { className: "transform-skipped" }, h("strong", {}, "skipped"), " (handler returned null: nothing would be sent)", took),
            logs(out.logs, out.logs_truncated));
        } else {
          show(h("div", { className: "transform-ok" }, h("strong", {}, "would send"), took),
            h("pre", { className: "body transform-output", id: "transform-output" }, JSON.stringify(out.request, null, 2)),
            logs(out.logs, out.logs_truncated));
        }
      } catch (error) {
        show(h("div", { className: "transform-error" }, error.message));
      } finally {
        run.disabled = false;
      }
    });
    replay.addEventListener("click", async () => {
      replay.disabled = true;
      show(h("span", {}, "sending…"));
      try {
        const out = await post(`/events/${encodeURIComponent(eventId)}/replay`, { url: url.value.trim(), transform: code.value });
        const what = out.transform && out.transform.outcome !== "applied" ? `transform ${out.transform.outcome}`
          : out.status === null ? "no response" : `HTTP ${out.status}`;
        show(h("div", { className: out.success ? "transform-ok" : "transform-error", id: "transform-replayed" },
          h("strong", {}, out.success ? "replayed" : "not delivered"), ` · ${what}`,
          out.error ? h("div", {}, out.error) : null),
        out.transform ? logs(out.transform.logs, out.transform.logs_truncated) : null);
      } catch (error) {
        show(h("div", { className: "transform-error" }, error.message));
      } finally {
        replay.disabled = false;
      }
    });
    return h("section", { className: "transform-editor" },
      h("h3", {}, "Transform"), code,
      h("div", { className: "transform-actions" }, run, url, replay), result);
  }

  // The detail pane is redrawn for every event selected: add the editor once the event is drawn (its replay
  // form is the last thing inbox.js draws), for the event named in the address's fragment.
  function attach(detail) {
    const eventId = location.hash.slice(1);
    if (!/^evt_[0-9A-Za-z]+$/.test(eventId) || !detail.querySelector("form.replay")) return;
    const shown = detail.querySelector(".transform-editor");
    if (shown && shown.dataset.event === eventId) return;
    if (shown) shown.remove();
    const section = editor(eventId);
    section.dataset.event = eventId;
    detail.append(section);
  }

  function watch() {
    const detail = document.getElementById("detail");
    if (!detail) { setTimeout(watch, 50); return; }
    new MutationObserver(() => attach(detail)).observe(detail, { childList: true });
    attach(detail);
  }
  watch();
})();
