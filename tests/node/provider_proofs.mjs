// The npm libraries' half of tests/edge/test_provider_libraries_node.py: each provider's own library signs a
// request or checks one the catalog signed, and refuses the tampered copy. Reads one case as JSON on stdin,
// writes its answer as JSON on stdout. Each library is imported by the branch that uses it: a process loads
// one provider's library, not all ten (loading them all cost each of the ten runs seconds of CPU).
import { createRequire } from "node:module";

console.debug = () => {}; // a library's debug lines (Rivet logs each event) would corrupt the JSON answer
const input = JSON.parse(await new Promise((resolve) => {
  let text = "";
  process.stdin.on("data", (chunk) => { text += chunk; });
  process.stdin.on("end", () => resolve(text));
}));

async function accepts(check) {
  try { return (await check()) !== false; } catch { return false; }
}

const { provider, body, tampered, headers, secret } = input;
let answer;
if (provider === "sanity") {
  const { encodeSignatureHeader, isValidSignature } = await import("@sanity/webhook");
  const header = await encodeSignatureHeader(body, Date.now(), secret);
  answer = {
    headers: { "sanity-webhook-signature": header },
    valid: await isValidSignature(body, header, secret),
    tampered: await isValidSignature(tampered, header, secret),
  };
} else if (provider === "linear") {
  const { LinearWebhookClient } = await import("@linear/sdk/webhooks");
  const client = new LinearWebhookClient(secret);
  const signature = headers["linear-signature"];
  answer = {
    valid: await accepts(() => client.verify(Buffer.from(body), signature)),
    tampered: await accepts(() => client.verify(Buffer.from(tampered), signature)),
  };
} else if (provider === "discord") {
  const { verifyKey } = await import("discord-interactions");
  const [signature, timestamp] = [headers["x-signature-ed25519"], headers["x-signature-timestamp"]];
  answer = {
    valid: await verifyKey(body, signature, timestamp, secret),
    tampered: await verifyKey(tampered, signature, timestamp, secret),
  };
} else if (provider === "mux") {
  const { default: Mux } = await import("@mux/mux-node");
  const mux = new Mux({ tokenId: "test-token-id", tokenSecret: "test-token-secret" });
  answer = {
    valid: await accepts(() => mux.webhooks.verifySignature(body, headers, secret)),
    tampered: await accepts(() => mux.webhooks.verifySignature(tampered, headers, secret)),
  };
} else if (provider === "code_host") {
  const { sign: octokitSign, verify: octokitVerify } = await import("@octokit/webhooks-methods");
  const header = await octokitSign(secret, body);
  answer = {
    headers: { "x-hub-signature-256": header },
    valid: await octokitVerify(secret, body, header),
    tampered: await octokitVerify(secret, tampered, header),
  };
} else if (provider === "webflow") {
  const { default: webflow } = await import("webflow-api");
  const client = new webflow.WebflowClient({ accessToken: "test-token" });
  answer = {
    valid: await client.webhooks.verifySignature({ headers, body, secret }),
    tampered: await client.webhooks.verifySignature({ headers, body: tampered, secret }),
  };
} else if (provider === "zoom") {
  const { AwsLambdaReceiver } = await import("@zoom/rivet/users");
  // Zoom's Rivet SDK as it receives a webhook (its Lambda receiver): 200 for a verified event, 400 for a
  // refused one, and for endpoint.url_validation the answer Zoom expects.
  const handle = new AwsLambdaReceiver({ webhooksSecretToken: secret }).start();
  const status = async (text) => (await handle({ body: text, headers, isBase64Encoded: false }, {})).statusCode;
  const validation = input.validation ?? null;
  answer = {
    valid: (await status(body)) === 200,
    tampered: (await status(tampered)) === 200,
    validation: validation === null ? null
      : JSON.parse((await handle({ body: validation, headers: input.validation_headers, isBase64Encoded: false }, {})).body),
  };
} else if (provider === "commerce") {
  await import("@shopify/shopify-api/adapters/web-api");
  const { ApiVersion, shopifyApi } = await import("@shopify/shopify-api");
  const shopify = shopifyApi({
    apiKey: "test-api-key", apiSecretKey: secret, scopes: [], hostName: "app.example.com",
    apiVersion: ApiVersion.January25, isEmbeddedApp: false, logger: { level: 0 },
  });
  const check = async (text) => (await shopify.webhooks.validate({
    rawBody: text,
    rawRequest: new Request("https://app.example.com/webhooks", { method: "POST", headers, body: text }),
  })).valid;
  answer = { valid: await check(body), tampered: await check(tampered) };
} else if (provider === "twitch") {
  const { EventSubMiddleware } = await import("@twurple/eventsub-http");
  // Twurple's EventSub receiver checks each delivery with _verifyData (message id, timestamp, raw body and
  // the signature header), the call its request handler makes before it parses the body; the API client is
  // only used to subscribe, which this check never does.
  const eventsub = new EventSubMiddleware({ apiClient: {}, hostName: "hooks.example.com", secret });
  const check = (text) => eventsub._verifyData(
    headers["twitch-eventsub-message-id"], headers["twitch-eventsub-message-timestamp"], text,
    headers["twitch-eventsub-message-signature"],
  );
  answer = { valid: check(body), tampered: check(tampered) };
} else if (provider === "meta") {
  // Meta's WhatsApp Business Platform SDK (npm `whatsapp`, by Meta) computes X-Hub-Signature-256 for its
  // webhook receiver with generateXHub256Sig. Its exports map lists only the client, so the module is
  // loaded by its file; the receiver compares that hex digest with the header after `sha256=`.
  const { generateXHub256Sig } = createRequire(import.meta.url)("./node_modules/whatsapp/build/utils.js");
  const header = `sha256=${generateXHub256Sig(body, secret)}`;
  const check = (text) => generateXHub256Sig(text, secret) === header.replace("sha256=", "");
  answer = { headers: { "x-hub-signature-256": header }, valid: check(body), tampered: check(tampered) };
} else {
  throw new Error(`no library for ${provider}`);
}
process.stdout.write(JSON.stringify(answer));
