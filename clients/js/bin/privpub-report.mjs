#!/usr/bin/env node
// The JS client's conformance entry point (privpub audit client ... -- node bin/privpub-report.mjs):
// first stdin line = the campaign's public configuration (with "partition" for a KDG-HT phase),
// then one JSON input per line; one base64 wire report per input on stdout, in order. Uses the
// client's real randomiser (Randomiser, crypto.getRandomValues).
import { Randomiser, b64encode } from "../dist/node.js";

let text = "";
process.stdin.setEncoding("utf8");
for await (const chunk of process.stdin) text += chunk;
const lines = text.split("\n").filter((l) => l.trim());
if (!lines.length) {
  process.stderr.write("error: expected the campaign configuration on the first line\n");
  process.exit(2);
}
const config = JSON.parse(lines[0]);
const randomiser = new Randomiser(config, config.partition);
const out = [];
for (let i = 1; i < lines.length; i++) out.push(b64encode(randomiser.report(JSON.parse(lines[i]))));
process.stdout.write(out.length ? out.join("\n") + "\n" : "");
