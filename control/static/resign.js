// hookyard inbox: which header a re-signed replay puts its signature in when none is named, shown in the
// re-sign box. The server decides (shared/signatures.provider_signature_header): the event's own signature
// header, its provider's in the family of names it arrived with (stripe-signature, or pay-signature for the
// neutral names), a catalog provider's own (x-slack-signature), x-signature when it has no provider scheme. The names and the order the server detects them
// in come from the page (control/api/inbox/page.py writes them from shared/signatures), so none is written here.
"use strict";

(() => {
  const table = JSON.parse(document.body.dataset.signatureHeaders || '{"order": [], "names": {}, "catalog": {}}');

  function ownHeader(event) {
    const own = (table.catalog || {})[event.provider];
    if (own) return own;
    const present = table.order.find(([name]) =>
      !(event.header_encodings || {})[name] && (event.headers[name] || "").trim() !== "");
    const scheme = table.names[event.provider] ? event.provider : present ? present[1] : null;
    if (!scheme) return "x-signature";
    const names = table.names[scheme];
    return (present && names[present[2]]) || names.neutral;
  }

  window.hookyardResign = { ownHeader };
})();
