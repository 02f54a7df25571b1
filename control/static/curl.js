// hookyard inbox page: "copy as curl", the shell command that sends a captured request again.
//
// A pure function of the event as /inbox/{id}/events/{event_id} returns it, in a file of its own so
// tests/security/test_copy_as_curl.py runs this very code (in node) and executes what it returns in bash and
// dash. The method, path, query and headers are the sender's: anyone who can post to the ingest URL chooses
// them, and RFC 9110 lets a method or header name hold ` $ & | '. The owner pastes the text into a shell, so
// every part is one shell word that says exactly its bytes, and the text itself is printable ASCII and
// newlines only: a control character in pasted text (Ctrl-U, Ctrl-C, ESC) acts on the terminal or the line
// editor before any quoting is read, and a raw non-UTF-8 byte cannot be copied at all. So:
// - a word of safe characters stays bare (`POST`); any other is single-quoted, and its bytes outside
//   printable ASCII come from `"$(printf '\ooo')"` (never a newline there: $(...) would strip it);
// - the body always goes through stdin, `printf '<format>' | curl ... --data-binary @-`, with octal escapes
//   for anything outside printable ASCII: exact for NUL and invalid UTF-8, and never read as curl's
//   `@file` (a body `@/home/me/.ssh/id_rsa` after --data-binary would upload that file);
// - --globoff, so [] and {} in a query are not curl URL globs;
// - a header that one argument cannot carry or that curl would send as something else is left out: a name
//   that is not an RFC 9110 token (`@name` reads a file, `a:b` splits elsewhere), a value with NUL, CR or LF,
//   and the hop-by-hop ones curl sets itself. An empty value is `name;` (curl drops `name:`).
"use strict";

const hookyardCurl = (() => {
  const HOP = new Set(["host", "content-length", "connection", "transfer-encoding", "keep-alive", "upgrade", "te",
    "trailer", "proxy-connection", "proxy-authorization", "proxy-authenticate", "expect"]);
  const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
  const BARE = /^[A-Za-z0-9@%+=:,./_-]+$/;
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  const octal = (b) => `\\${b.toString(8).padStart(3, "0")}`;
  const plain = (b) => (b >= 0x20 && b < 0x7f) || b === 0x0a;

  function utf8OrBase64(text, encoding) {
    if (encoding === "base64") return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
    return encoder.encode(text);
  }
  function concat(head, tail) {
    const out = new Uint8Array(head.length + tail.length);
    out.set(head);
    out.set(tail, head.length);
    return out;
  }

  // A single-quoted printf format that prints exactly `data`: % and \ doubled, ' as '\'', a newline as
  // itself, a leading - escaped (printf would take it for an option), other non-printable bytes as \ooo.
  function printfFormat(data) {
    let out = "'";
    data.forEach((b, i) => {
      if (b === 0x25) out += "%%";
      else if (b === 0x5c) out += "\\\\";
      else if (b === 0x27) out += "'\\''";
      else if (b === 0x2d && i === 0) out += octal(b);
      else out += plain(b) ? String.fromCharCode(b) : octal(b);
    });
    return `${out}'`;
  }

  // One shell word whose value is exactly `data` (a string, as UTF-8, or bytes): runs of printable ASCII and
  // newlines single-quoted (' as '\''), runs of other bytes as "$(printf '\ooo...')". NUL cannot be in an
  // argument at all: callers leave such values out.
  function word(data) {
    if (typeof data === "string") data = encoder.encode(data);
    const ascii = (from, to) => decoder.decode(data.subarray(from, to)); // only ever on plain (ASCII) bytes
    if (data.every(plain) && BARE.test(ascii(0, data.length))) return ascii(0, data.length);
    let out = "";
    for (let i = 0, j = 0; i < data.length; i = j) {
      if (plain(data[i])) {
        while (j < data.length && plain(data[j])) j++;
        out += `'${ascii(i, j).replace(/'/g, "'\\''")}'`;
      } else {
        while (j < data.length && !plain(data[j])) j++;
        out += `"$(printf '${Array.from(data.subarray(i, j), octal).join("")}')"`;
      }
    }
    return out || "''";
  }

  function curlCommand(ingestUrl, event) {
    // The path is stored with its leading slash ("/" for the bare ingest URL, which is copied bare).
    const path = event.path && event.path !== "/" ? event.path : "";
    const url = ingestUrl + path + (event.query ? `?${event.query}` : "");
    const parts = ["curl", "-X", word(event.method), "--globoff", word(url)];
    const encodings = event.header_encodings || {};
    for (const [name, value] of Object.entries(event.headers || {})) {
      if (HOP.has(name.toLowerCase()) || !TOKEN.test(name)) continue;
      const raw = utf8OrBase64(value, encodings[name]);
      if (raw.some((b) => b === 0 || b === 0x0a || b === 0x0d)) continue;
      parts.push("-H", word(concat(encoder.encode(raw.length ? `${name}: ` : `${name};`), raw)));
    }
    if (event.body === null || event.body === undefined) return parts.join(" ");
    return `printf ${printfFormat(utf8OrBase64(event.body, event.body_encoding))} | ${parts.join(" ")} --data-binary @-`;
  }

  return { curlCommand };
})();

