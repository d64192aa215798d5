// The conformance audit of this client under Node: `privpub audit client` on every campaign kind
// (configurations from tests/audit/client_configs.py), with bin/privpub-report.mjs as the client.
// PRIVPUB_PYTHON names the Python interpreter with privpub installed (default: python3).
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const repo = fileURLToPath(new URL("../../../", import.meta.url));
const python = process.env.PRIVPUB_PYTHON ?? "python3";
const reports = process.env.PRIVPUB_CONFORMANCE_REPORTS ?? "1500";
const folder = mkdtempSync(join(tmpdir(), "privpub-conformance-"));
const made = spawnSync(python, [join(repo, "tests/audit/client_configs.py"), folder], { stdio: "inherit" });
if (made.status !== 0) process.exit(made.status ?? 1);
const entry = fileURLToPath(new URL("../bin/privpub-report.mjs", import.meta.url));
let failed = 0;
for (const file of readdirSync(folder).sort()) {
  console.error(`== privpub audit client: ${file}`);
  const run = spawnSync(python, ["-m", "privpub", "audit", "client", "--config", join(folder, file),
                                 "--reports", reports, "--", process.execPath, entry], { stdio: "inherit" });
  if (run.status !== 0) failed++;
}
if (failed) {
  console.error(`conformance audit FAILED on ${failed} configuration(s)`);
  process.exit(1);
}
console.error("conformance audit passed on every campaign kind");
