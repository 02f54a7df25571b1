// hookyard inbox page: the raw tab of a body that is not UTF-8 text, as `hexdump -C` prints it.
//
// A pure function of the body's bytes, in a file of its own so tests/onboarding/test_inbox_samples.py runs
// this very code (in node) and compares it with `hexdump -C` byte for byte: offset, sixteen bytes in two
// groups of eight, the printable ASCII column (anything else a dot), and the length on the last line. Only
// the first LIMIT bytes are drawn (a 1 MiB body would be 4 MiB of text); the download link has them all.
"use strict";

const hookyardHex = (() => {
  const LIMIT = 64 * 1024;
  const hex = (n, width) => n.toString(16).padStart(width, "0");

  function hexDump(data, limit = LIMIT) {
    const shown = Math.min(data.length, limit);
    const lines = [];
    for (let offset = 0; offset < shown; offset += 16) {
      const row = data.subarray(offset, Math.min(offset + 16, shown));
      let bytes = "";
      for (let i = 0; i < 16; i++) bytes += (i < row.length ? `${hex(row[i], 2)} ` : "   ") + (i === 7 ? " " : "");
      const ascii = Array.from(row, (b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : ".")).join("");
      lines.push(`${hex(offset, 8)}  ${bytes} |${ascii}|`);
    }
    lines.push(hex(shown, 8));
    if (data.length > shown) lines.push(`(${data.length - shown} more bytes: download the raw body for all of it)`);
    return lines.join("\n");
  }

  return { hexDump, LIMIT };
})();
