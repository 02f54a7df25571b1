"""The JavaScript that makes a fresh V8 isolate a sandbox, and the wrapper user code is compiled in.

Run once per isolate, before any user code: it removes what could reach outside the call or outlive it,
then freezes every object reachable from the global object (and the intrinsics only reachable through
syntax or what a builtin returns: generator, async, iterator and iterator-helper prototypes, Intl.Segmenter's
segments), and the global object itself; RegExp's legacy statics (``RegExp.input``, ``$1``...), which show
the last match, are removed. What that buys:

- no I/O: V8 has no network, file system or module loader of its own; ``import()`` has no host loader and
  rejects. What mini-racer adds (``setTimeout``/``clearTimeout`` over ``Atomics.waitAsync``) is removed, as
  are ``WebAssembly`` (a second compiler and memories outside the heap limit), ``SharedArrayBuffer`` and
  ``Atomics`` (blocking waits), and ``ArrayBuffer``, ``DataView`` and the typed arrays: their backing stores
  live outside V8's heap, where the isolate's memory limit does not look (a ``Uint8Array`` of 1 GiB filled
  in a loop grew the worker by 470 MB within the 1 s limit);
- no state from one call to the next: with every shared object frozen, a call cannot leave anything behind
  (``Object.prototype.x = 1`` throws in the strict code the wrapper compiles); the user's own top-level
  variables live in a factory that runs anew for every call (``body``), so each call starts from the
  source as written.

Not removed: ``Date`` and ``Math.random`` (a transform may stamp or sample; neither reaches outside), and
``eval``/``Function`` (they compile into the same frozen world; sloppy code there cannot write the frozen
global either).
"""

from __future__ import annotations

__all__ = ("FILENAME", "LINE_OFFSET", "PRELUDE", "RUNNER", "body", "script")

FILENAME = "transform.js"
"""The name stack traces give the user's code: a line number is read after it (``transform.js:3:9``)."""

PRELUDE = r"""
(function () {
  "use strict";
  const g = globalThis;
  const removed = [
    "WebAssembly", "SharedArrayBuffer", "Atomics", "ArrayBuffer", "DataView", "Int8Array", "Uint8Array",
    "Uint8ClampedArray", "Int16Array", "Uint16Array", "Int32Array", "Uint32Array", "Float16Array",
    "Float32Array", "Float64Array", "BigInt64Array", "BigUint64Array", "FinalizationRegistry", "WeakRef",
    "queueMicrotask", "setInterval", "clearInterval", "setImmediate", "fetch", "XMLHttpRequest",
  ];
  for (const name of removed) {
    if (Object.prototype.hasOwnProperty.call(g, name)) delete g[name];
  }
  // RegExp's legacy static properties (RegExp.input, $1...$9, lastMatch...) read the isolate's last match:
  // one call's data, shown to the next. Removed (they are configurable accessors).
  for (const name of [
    "input", "$_", "lastMatch", "$&", "lastParen", "$+", "leftContext", "$`", "rightContext", "$'",
    "$1", "$2", "$3", "$4", "$5", "$6", "$7", "$8", "$9",
  ]) {
    delete g.RegExp[name];
  }
  // mini-racer's timers are `var` bindings (not deletable): emptied instead, and its class frozen below.
  for (const name of ["setTimeout", "clearTimeout", "__timer_manager"]) {
    if (Object.prototype.hasOwnProperty.call(g, name)) g[name] = undefined;
  }
  const roots = [
    g,
    Object.getPrototypeOf(function* () {}),
    Object.getPrototypeOf(async function () {}),
    Object.getPrototypeOf(async function* () {}),
    Object.getPrototypeOf([][Symbol.iterator]()),
    Object.getPrototypeOf(new Map().entries()),
    Object.getPrototypeOf(new Set().values()),
    Object.getPrototypeOf(""[Symbol.iterator]()),
    Object.getPrototypeOf(/a/[Symbol.matchAll]("a")),
  ];
  // Intrinsics only reachable through what a builtin returns: iterator helpers, Iterator.from's wrapper,
  // Intl.Segmenter's segments and their iterator.
  const reached = [
    () => [].values().map((x) => x),
    () => Iterator.from({ next() { return { done: true }; } }),
    () => new Intl.Segmenter().segment(""),
    () => new Intl.Segmenter().segment("")[Symbol.iterator](),
  ];
  for (const make of reached) {
    try { roots.push(Object.getPrototypeOf(make())); } catch (e) { /* not in this V8 */ }
  }
  if (typeof __TimerManager === "function") roots.push(__TimerManager);
  const seen = new Set();
  const queue = roots.slice();
  while (queue.length) {
    const value = queue.pop();
    if ((typeof value !== "object" && typeof value !== "function") || value === null || seen.has(value)) continue;
    seen.add(value);
    queue.push(Object.getPrototypeOf(value));
    for (const key of Reflect.ownKeys(value)) {
      const d = Reflect.getOwnPropertyDescriptor(value, key);
      if (d === undefined) continue;
      if ("value" in d) queue.push(d.value);
      else queue.push(d.get, d.set);
    }
  }
  for (const value of seen) Object.freeze(value);
})();
"""

RUNNER = r"""
(function (factory, maxOutput, maxLogs, lineOffset, maxDepth) {
  "use strict";
  // Whether a field of the returned request (JSON text of an object) nests past maxDepth levels, the cap
  // every JSON input has (shared.json_depth), so a captured body at the cap can come back as it was: what
  // nests deeper is refused here, with the limit named, and never reaches a decoder that would recurse.
  // Brackets are first counted with indexOf (native): a text with no more of them than the limit cannot
  // nest past it, and the usual returned request (a few headers, its body left out) is never walked.
  const brackets = (text, c, room) => {
    let n = 0;
    for (let i = text.indexOf(c); i !== -1 && n <= room; i = text.indexOf(c, i + 1)) n++;
    return n;
  };
  const tooDeep = (text) => {
    if (brackets(text, "{", maxDepth + 1) + brackets(text, "[", maxDepth + 1) <= maxDepth + 1) return false;
    let depth = 0, inString = false;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (inString) {
        if (c === 92) i++;
        else if (c === 34) inString = false;
      } else if (c === 34) inString = true;
      else if (c === 123 || c === 91) { if (++depth > maxDepth + 1) return true; }
      else if (c === 125 || c === 93) depth--;
    }
    return false;
  };
  const parse = JSON.parse, stringify = JSON.stringify, isArray = Array.isArray, now = Date.now;
  const keys = Object.keys;
  const describe = (value) => {
    try {
      if (typeof value === "string") return value;
      if (value instanceof Error) return String(value.stack || value);
      const text = stringify(value);
      return text === undefined ? String(value) : text;
    } catch (e) {
      try { return String(value); } catch (e2) { return "[unprintable]"; }
    }
  };
  const where = (e) => {
    try {
      const m = /transform\.js:(\d+)/.exec(String(e && e.stack));
      return m ? Number(m[1]) - lineOffset : null;
    } catch (e2) { return null; }
  };
  const message = (e) => {
    try {
      if (e instanceof Error) return String(e.name) + ": " + String(e.message);
      return "uncaught " + describe(e);
    } catch (e2) { return "uncaught exception"; }
  };
  const one = (input) => {
    const started = now();
    const logs = [];
    let room = maxLogs, dropped = false;
    const write = (level) => (...args) => {
      if (dropped) return;
      let line = args.map(describe).join(" ");
      if (level !== "log") line = level + ": " + line;
      if (line.length > room) { line = line.slice(0, room); dropped = true; }
      room -= line.length + 1;
      logs.push(line);
      if (room <= 0) dropped = true;
    };
    const console = Object.freeze({
      log: write("log"), info: write("info"), warn: write("warn"), error: write("error"), debug: write("debug"),
    });
    // The answer is JSON text; the returned request's own JSON is spliced in, not encoded twice. It is a
    // Run (control.transform.wire) as an array: request, error, line, logs, logs_truncated, duration_ms,
    // decoded into the Struct at once, no dict per call.
    const done = (error, line, request) =>
      "[" + request + "," + (error === null ? "null" : stringify(error)) + "," + line + "," +
      (logs.length ? stringify(logs) : "[]") + "," + dropped + "," + (now() - started) + "]";
    const fail = (text, line) => done(text, line === undefined || line === null ? "null" : +line, "null");
    // A delivery's request (control.transform.apply.payload_of) has its body as text, parsed here when
    // JSON; `same` is the JSON of the body as handed in (null for text), to tell an unchanged one.
    const delivery = input.text !== undefined;
    let given, same = null;
    if (delivery) {
      given = input.text;
      if (input.json) {
        try {
          const parsed = parse(given);
          if (parsed !== null) { given = parsed; same = stringify(parsed); }
        } catch (e) { /* not JSON after all: the text */ }
      }
      input.request.body = given;
    }
    let handler, result;
    try {
      handler = factory(console);
    } catch (e) {
      return fail("while loading: " + message(e), where(e));
    }
    if (typeof handler !== "function") return fail("the transform defines no function handler(request, context)");
    if (input.check) return done(null, "null", "null");  // loading it was the check
    try {
      result = handler(input.request, input.context);
    } catch (e) {
      return fail(message(e), where(e));
    }
    if (result === undefined) return fail("handler returned nothing: return the request to send, or null to skip");
    if (result !== null && (typeof result !== "object" || isArray(result))) {
      const kind = isArray(result) ? "an array" : typeof result;
      return fail("handler must return an object (the request) or null, not " + kind);
    }
    let text, kept = false;  // kept: the body handed in, left out of the answer (still counted in its size)
    try {
      if (result !== null && typeof result.then === "function") {
        return fail("handler returned a Promise: it must return the request itself (there is no I/O to wait for)");
      }
      let copy = null, body, value, has = false;
      if (delivery && result !== null && typeof result.toJSON !== "function") {
        // The body left out of the answer when it is the one handed in (its JSON, or the same text): the
        // caller sends the captured bytes. Any other body is spliced in as its JSON, last. The other fields
        // are copied into a new object (not deleted from one: that leaves V8's fast JSON path); a field
        // that is not a request's sends the object as it is, for the caller to refuse.
        copy = {};
        for (const key of keys(result)) {
          if (key === "body") { has = true; value = result.body; }
          else if (key === "method" || key === "path" || key === "query" || key === "headers") copy[key] = result[key];
          else { copy = null; break; }
        }
      }
      if (copy === null) {
        text = stringify(result);
      } else {
        if (has) {
          body = stringify(value);
          kept = body !== undefined && (same === null ? value === given : body === same);
        }
        text = stringify(copy);
        if (body !== undefined && !kept) {
          text = text.slice(0, -1) + (text.length > 2 ? ',"body":' : '"body":') + body + "}";
        }
      }
    } catch (e) {
      return fail("the returned request cannot be sent as JSON: " + message(e));
    }
    const size = text.length + (kept ? input.text.length : 0);
    if (size > maxOutput) return fail("the returned request is larger than " + maxOutput + " characters");
    if (tooDeep(text)) {
      const limit = " levels (the limit on JSON depth)";
      return fail("a field of the returned request nests deeper than " + maxDepth + limit);
    }
    return done(null, "null", text);
  };
  // A batch: the calls that waited while the previous batch ran, in one task on the isolate's thread.
  // `this`: the bodies' total length in UTF-16 code units (10 digits), the bodies one after another, then
  // the inputs as a JSON array; a delivery's input says how long its body is (`n`), taken in order.
  return function () {
    const size = +this.slice(0, 10);
    const bodies = this.slice(10, 10 + size);
    const inputs = parse(this.slice(10 + size));
    const out = [];
    let at = 0;
    for (const input of inputs) {
      if (input.n !== undefined) {
        input.text = bodies.slice(at, at + input.n);
        at += input.n;
      }
      out.push(one(input));
    }
    return "[" + out.join(",") + "]";
  };
})
"""


LINE_OFFSET = 2
"""``Function("console", body)`` compiles ``(function anonymous(console\n) {\n<body>``: the body's first line
is the function's third, and stack traces count from there."""


def body(source: str) -> str:
    """The body of the factory the user's source is compiled as, with ``Function("console", body)``: the
    Function constructor parses the body on its own, so no source can close the function early and run at
    the isolate's top level. The source runs in strict mode, and its top-level declarations are the
    factory's locals, made anew by every call. The prefix stays on the source's first line, so a line of
    the source is line ``LINE_OFFSET`` further down in stack traces."""
    return (
        '"use strict";'
        + source
        + '\n;return typeof handler === "function" ? handler : undefined;\n//# sourceURL='
        + FILENAME
    )


def script(source: str) -> str:
    """The same source as a script of its own, only compiled (never run) to find the line of a syntax
    error, which the Function constructor does not tell: its line numbers are the source's."""
    return '(function (console) {"use strict";' + source + "\n})"
