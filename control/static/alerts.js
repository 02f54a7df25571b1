// hookyard inbox page: the banner of the endpoint's open alerts (a failing destination, deliveries that used
// up their retries, failed signatures, silence, dead letters), read from /inbox/{id}/alerts when the page
// opens and every 30 s. Its own file beside inbox.js: the list and detail code need not know it.
//
// Alert data holds names and messages that others chose (a destination's name is the account's text): it
// reaches the document only as text nodes, never as markup.
"use strict";

(() => {
  const endpointId = document.body.dataset.endpoint;
  const base = `/inbox/${encodeURIComponent(endpointId)}`;
  const EVERY_MS = 30000;
  const LABELS = {
    "destination.circuit_opened": "destination failing",
    "destination.disabled": "destination disabled",
    "delivery.exhausted": "deliveries exhausted their retries",
    "endpoint.signature_failures": "signatures failing",
    "endpoint.silent": "no events arriving",
    "dead_letter.added": "records not stored",
  };

  function h(tag, props, ...children) {
    const el = document.createElement(tag);
    Object.assign(el, props || {});
    for (const child of children.flat()) {
      if (child === null || child === undefined) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }
  function when(iso) {
    const d = new Date(iso);
    return Number.isNaN(d.getTime()) ? iso : d.toLocaleString(undefined, { hour12: false });
  }

  const banner = h("section", { id: "alerts", className: "alerts", hidden: true, ariaLabel: "open alerts" });
  const status = document.getElementById("status");
  (status || document.querySelector("header")).after(banner);

  function draw(alerts) {
    while (banner.firstChild) banner.firstChild.remove();
    banner.hidden = alerts.length === 0;
    if (!alerts.length) return;
    banner.setAttribute("role", "alert");
    banner.append(h("h2", {}, alerts.length === 1 ? "1 open alert" : `${alerts.length} open alerts`));
    banner.append(h("ul", {}, alerts.map((a) => h("li", { className: "alert" },
      h("strong", { className: "alert-type" }, LABELS[a.type] || a.type), " ",
      h("code", {}, a.type), " · since ",
      h("time", { dateTime: a.since }, when(a.since)),
      a.destination_id ? [" · destination ", h("span", { className: "alert-destination" },
        a.destination_name || a.destination_id)] : null,
      a.count > 0 ? [" · count ", h("span", { className: "alert-count" }, String(a.count))] : null,
      h("div", { className: "alert-text" }, a.text)))));
  }

  async function load() {
    try {
      const resp = await fetch(`${base}/alerts`, { credentials: "same-origin", cache: "no-store" });
      if (resp.ok) draw((await resp.json()).alerts);
    } catch (_) { /* the list's own status line says when the page cannot reach the server */ }
  }
  load();
  setInterval(load, EVERY_MS);
})();
