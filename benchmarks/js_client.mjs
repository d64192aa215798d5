// Speed of the JS participant client under Node (issue 23): OUE reports of 1,024 bits per second,
// and the size of the minified bundle (raw and gzipped). Run: `npm run bench` in clients/js
// (or `node benchmarks/js_client.mjs` after `npm run build`). Bounded: about 3 seconds.
import { readFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

const dist = new URL("../clients/js/dist/", import.meta.url);
const { Randomiser } = await import(new URL("node.js", dist).href);

const d = 1024;
const config = { kind: "frequency", epsilon: 1, oracle: "OUE", categories: Array.from({ length: d }, (_, i) => `c${i}`) };
const r = new Randomiser(config);
for (let i = 0; i < 2000; i++) r.report(`c${i % d}`); // warm up
const rates = [];
const cpuRates = []; // per second of this process's CPU time: what an unloaded core would do
for (let rep = 0; rep < 3; rep++) {
  const n = 50_000;
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) r.report(`c${i % d}`);
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  const c = process.cpuUsage(c0);
  rates.push(n / s);
  cpuRates.push(n / ((c.user + c.system) / 1e6));
}
const bundle = readFileSync(fileURLToPath(new URL("privpub.min.js", dist)));
const out = {
  node: process.version,
  cpu: cpus()[0]?.model,
  load_1m: loadavg()[0],
  oue_1024_reports_per_s: Math.max(...rates),
  oue_1024_reports_per_s_runs: rates.map(Math.round),
  oue_1024_reports_per_cpu_s: Math.max(...cpuRates),
  bundle_bytes: bundle.length,
  bundle_gzip_bytes: gzipSync(bundle, { level: 9 }).length,
};
console.log(JSON.stringify(out, null, 2));
