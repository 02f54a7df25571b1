// hookyard inbox page: the endpoint's destinations with their state, and a button to disable or enable each
// (a disabled destination is sent nothing; its deliveries are held until it is enabled, then go out in
// order). Read from /inbox/{id}/destinations when the page opens, after each click and every 30 s. Its own
// file beside inbox.js: the list and detail code need not know it.
//
// Names, URLs and reasons are the account's text: they reach the document only as text nodes.
"use strict";

(() => {
  const endpointId = document.body.dataset.endpoint;
  const base = `/inbox/${encodeURIComponent(endpointId)}/destinations`;
  const EVERY_MS = 30000;

  function h(tag, props, ...children) {
    const el = document.createElement(tag);
    Object.assign(el, props || {});
    for (const child of children.flat()) {
      if (child === null || child === undefined) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  const panel = h("section", { id: "destinations", className: "destinations", hidden: true, ariaLabel: "destinations" });
  (document.getElementById("alerts") || document.getElementById("status") || document.querySelector("header")).after(panel);

  async function act(destination, action, button) {
    button.disabled = true;
    try {
      const resp = await fetch(`${base}/${encodeURIComponent(destination.id)}/${action}`, {
        method: "POST", credentials: "same-origin", cache: "no-store",
      });
      if (!resp.ok) {
        const body = await resp.json().catch(() => ({}));
        button.after(h("span", { className: "destination-error" }, (body.error && body.error.message) || `HTTP ${resp.status}`));
      }
    } finally {
      await load();
    }
  }

  function row(d) {
    const disabled = d.state === "disabled";
    const action = disabled ? "enable" : "disable";
    const button = h("button", { type: "button", className: `destination-${action}` }, disabled ? "Enable" : "Disable");
    button.addEventListener("click", () => act(d, action, button));
    const item = h("li", { className: `destination ${d.state}` },
      h("strong", { className: "destination-name" }, d.name || d.id), " ",
      h("code", { className: "destination-url" }, d.url), " · ",
      h("span", { className: "destination-state" }, d.state),
      disabled && d.disabled_reason ? [" · ", h("span", { className: "destination-reason" }, d.disabled_reason)] : null,
      d.auth ? [" · auth ", h("code", {}, d.auth.type)] : null,
      d.transform_crashed_at
        ? [" · ", h("span", { className: "destination-transform-crash", title: d.transform_crash || "" },
            "transform crashed its sandbox: not run until its code changes or a delivery is retried")]
        : null,
      d.transform_slowed_at
        ? [" · ", h("span", { className: "destination-transform-slowed", title: `since ${d.transform_slowed_at}` },
            `transform slowed: each call waits ${d.transform_slowed_s} s after repeated stops by its limits; fix the code to end it`)]
        : null,
      " ", button);
    item.dataset.id = d.id;
    return item;
  }

  function draw(destinations) {
    while (panel.firstChild) panel.firstChild.remove();
    panel.hidden = destinations.length === 0;
    if (!destinations.length) return;
    panel.append(h("h2", {}, "Destinations"), h("ul", {}, destinations.map(row)));
  }

  async function load() {
    try {
      const resp = await fetch(base, { credentials: "same-origin", cache: "no-store" });
      if (resp.ok) draw((await resp.json()).destinations);
    } catch (_) { /* the list's own status line says when the page cannot reach the server */ }
  }
  load();
  setInterval(load, EVERY_MS);
})();
