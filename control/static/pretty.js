// hookyard inbox: a JSON body shown indented and coloured from its own text, every token exactly as sent.
//
// JSON.parse and JSON.stringify would show another document: `48.0` becomes `48`, `1e2` becomes `100`, an
// integer past 2^53 changes its digits, `"\u00e9"` becomes `"é"`, and of two equal keys one is dropped. Here a
// tokenizer walks the original text, checks it against the JSON grammar (RFC 8259) as it goes, and emits each
// token's own characters; only the whitespace between tokens is replaced (two spaces per level, one item a
// line). A text that is not JSON gets no pretty view (null). The result is a DocumentFragment of text nodes
// and class-only spans (tokens are text, never markup): captured data never becomes HTML.
"use strict";

(() => {
  const WS = /[ \t\n\r]*/y;
  const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
  const LITERAL = /true|false|null/y;
  const ESCAPED = /["\\/bfnrt]|u[0-9a-fA-F]{4}/y;
  const MAX_DEPTH = 512;
  const MAX_SPANS = 50000; // past this many tokens the view is indented text alone: a DOM that stays light

  function tokens(text) {
    // [kind, text] pairs in order, or null when the text is not one JSON value.
    const out = [];
    let at = 0;
    const skip = () => { WS.lastIndex = at; WS.exec(text); at = WS.lastIndex; };
    const take = (re, kind) => {
      re.lastIndex = at;
      const m = re.exec(text);
      if (!m) return false;
      out.push([kind, m[0]]);
      at = re.lastIndex;
      return true;
    };
    const string = (kind) => { // scanned, not matched: a regex over a 1 MiB string can run out of stack
      if (text[at] !== '"') return false;
      let end = at + 1;
      for (;;) {
        const code = text.charCodeAt(end);
        if (Number.isNaN(code) || code < 0x20) return false; // the text ended, or a raw control character
        if (code === 0x22) break;
        if (code === 0x5c) {
          ESCAPED.lastIndex = end + 1;
          if (!ESCAPED.exec(text)) return false;
          end = ESCAPED.lastIndex;
        } else {
          end += 1;
        }
      }
      out.push([kind, text.slice(at, end + 1)]);
      at = end + 1;
      return true;
    };
    const punct = (ch) => {
      if (text[at] !== ch) return false;
      out.push(["punct", ch]);
      at += 1;
      return true;
    };
    function value(depth) {
      if (depth > MAX_DEPTH) return false;
      skip();
      const ch = text[at];
      if (ch === "{") {
        punct("{");
        skip();
        if (punct("}")) return true;
        for (;;) {
          skip();
          if (!string("key")) return false;
          skip();
          if (!punct(":")) return false;
          if (!value(depth + 1)) return false;
          skip();
          if (punct("}")) return true;
          if (!punct(",")) return false;
        }
      }
      if (ch === "[") {
        punct("[");
        skip();
        if (punct("]")) return true;
        for (;;) {
          if (!value(depth + 1)) return false;
          skip();
          if (punct("]")) return true;
          if (!punct(",")) return false;
        }
      }
      if (ch === '"') return string("string");
      if (ch === "t" || ch === "f" || ch === "n") return take(LITERAL, "literal");
      return take(NUMBER, "number");
    }
    if (!value(0)) return null;
    skip();
    return at === text.length ? out : null;
  }

  function render(text) {
    const list = tokens(text);
    if (list === null) return null;
    const colour = list.length <= MAX_SPANS;
    const fragment = document.createDocumentFragment();
    let plain = "";
    let depth = 0;
    const flush = () => { if (plain) { fragment.append(document.createTextNode(plain)); plain = ""; } };
    const emit = (kind, token) => {
      if (!colour || kind === "punct") { plain += token; return; }
      flush();
      const span = document.createElement("span");
      span.className = `json-${kind}`;
      span.textContent = token;
      fragment.append(span);
    };
    const newline = () => { plain += "\n" + "  ".repeat(depth); };
    for (let i = 0; i < list.length; i++) {
      const [kind, token] = list[i];
      const next = list[i + 1];
      if (token === "{" || token === "[") {
        emit(kind, token);
        if (next && (next[1] === "}" || next[1] === "]")) { emit(next[0], next[1]); i++; continue; } // {} and []
        depth++;
        newline();
      } else if (kind === "punct" && (token === "}" || token === "]")) {
        depth--;
        newline();
        emit(kind, token);
      } else if (kind === "punct" && token === ",") {
        emit(kind, token);
        newline();
      } else if (kind === "punct" && token === ":") {
        emit(kind, ": ");
      } else {
        emit(kind, token);
      }
    }
    flush();
    return fragment;
  }

  window.hookyardPretty = { tokens, render };
})();
