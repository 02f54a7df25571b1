// A Standard Webhooks receiver that verifies `v1a` (Ed25519) signatures with Node's own crypto, as the spec
// describes: the signed content is `${webhook-id}.${webhook-timestamp}.${raw body}`, each space separated
// `v1a,<base64>` entry of `webhook-signature` may match, and the timestamp must be within five minutes.
// No npm package verifies v1a (the `standardwebhooks` package checks `v1` only), so none is used.
//
// Usage: node v1a_receiver.mjs whpk_<base64 public key>
// Prints the port it listens on (loopback), answers 204 to a verified request and 401 to any other, and
// prints one JSON line per request: {"verified": true|false, "id": "..."}.
import { createPublicKey, verify } from "node:crypto";
import { createServer } from "node:http";

const TOLERANCE_S = 5 * 60;
const raw = Buffer.from(process.argv[2].replace(/^whpk_/, ""), "base64");
const publicKey = createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: raw.toString("base64url") }, format: "jwk" });

function verified(headers, body) {
  const id = headers["webhook-id"];
  const timestamp = headers["webhook-timestamp"];
  const signatures = headers["webhook-signature"];
  if (!id || !timestamp || !signatures) return false;
  if (Math.abs(Math.floor(Date.now() / 1000) - Number(timestamp)) > TOLERANCE_S) return false;
  const signed = Buffer.concat([Buffer.from(`${id}.${timestamp}.`), body]);
  return signatures.split(" ").some((entry) => {
    const [version, signature] = entry.split(",", 2);
    return version === "v1a" && verify(null, signed, publicKey, Buffer.from(signature ?? "", "base64"));
  });
}

const server = createServer((request, response) => {
  const chunks = [];
  request.on("data", (chunk) => chunks.push(chunk));
  request.on("end", () => {
    const ok = verified(request.headers, Buffer.concat(chunks));
    console.log(JSON.stringify({ verified: ok, id: request.headers["webhook-id"] ?? null }));
    response.writeHead(ok ? 204 : 401).end();
  });
});
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
