// The inbox's shipped "copy as curl" (control/static/curl.js) as a process: one JSON line in
// ({"ingest": url, "event": event as the data route returns it}), one JSON line out ({"text": ...} or
// {"error": ...}). The file is run as the browser runs it, a classic script in the global scope: no copy of it.
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import vm from "node:vm";

const source = new URL("../../control/static/curl.js", import.meta.url);
vm.runInThisContext(readFileSync(source, "utf8"), { filename: source.pathname });
const { curlCommand } = vm.runInThisContext("hookyardCurl");

for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  let answer;
  try {
    const { ingest, event } = JSON.parse(line);
    answer = { text: curlCommand(ingest, event) };
  } catch (error) {
    answer = { error: String(error && error.stack) };
  }
  process.stdout.write(`${JSON.stringify(answer)}\n`);
}
