// Copy the built minified bundle into the Python package (served at GET /client.js), or with
// --check fail when the committed copy differs from a fresh build (run `npm run bundle`).
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const built = fileURLToPath(new URL("../dist/privpub.min.js", import.meta.url));
const shipped = fileURLToPath(new URL("../../../src/privpub/service/static/client.js", import.meta.url));
const fresh = readFileSync(built, "utf8");
if (process.argv.includes("--check")) {
  let current = "";
  try {
    current = readFileSync(shipped, "utf8");
  } catch {
    /* missing */
  }
  if (current !== fresh) {
    console.error(`${shipped} is stale: run \`npm run bundle\` in clients/js and commit it`);
    process.exit(1);
  }
  console.error(`shipped bundle is current (${fresh.length} bytes)`);
} else {
  writeFileSync(shipped, fresh);
  console.error(`wrote ${shipped} (${fresh.length} bytes)`);
}
