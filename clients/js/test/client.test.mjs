import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import {
  Bernoulli, FileQueue, MemoryQueue, OfflineError, Participant, Randomiser, SubmissionError, b64decode, b64encode,
  cellCount, doubleToRational, dyadicUp, flipProbability, locateCell, olhHash, uniformInt,
} from "../dist/node.js";

// privpub.ldp._base.flip_probability(eps, k) -> (numerator, bits), computed by the Python library
const PYTHON_THRESHOLDS = [
  [1, 2, 2310189219n, 33], [0.5, 2, 3243049651n, 33], [1, 4, 4506564131n, 33], [2, 3, 3659551931n, 34],
  [0.1, 1000, 2196593214572n, 41], [8, 2, 2949770943n, 43], [40, 2, 2629603917n, 89], [0.01, 2, 4273492639n, 33],
  [3.7, 17, 2434818723n, 33], [1e-6, 2, 4294965149n, 33], [20, 5, 2376348317n, 58],
];

test("thresholds match the Python randomisers bit for bit", () => {
  for (const [eps, k, num, bits] of PYTHON_THRESHOLDS) {
    const d = flipProbability(eps, k);
    assert.equal(d.numerator, num, `eps=${eps} k=${k}`);
    assert.equal(d.bits, bits, `eps=${eps} k=${k}`);
  }
  // SUE with a declared flip probability: dyadic_up(Fraction(f) / 2)
  const f = doubleToRational(0.6784872624683657);
  const q = dyadicUp(f.num, f.den * 2n);
  assert.deepEqual([q.numerator, q.bits], [2914080604n, 33]);
});

test("a Bernoulli draw is exact on the threshold's words", () => {
  // a fake source: the threshold 1/2 splits the words at 2**31
  const words = [0x7fffffff, 0x80000000, 0, 0xffffffff];
  const src = { word: () => words.shift() };
  const half = new Bernoulli({ numerator: 1n, bits: 1 });
  assert.deepEqual([half.draw(src), half.draw(src), half.draw(src), half.draw(src)], [true, false, true, false]);
  // a tie on the first word is decided by the next
  const t = new Bernoulli({ numerator: (1n << 40n) + 1n, bits: 64 });  // words [256, 1]
  const tie = [256, 0, 256, 1, 255];
  const s2 = { word: () => tie.shift() };
  assert.deepEqual([t.draw(s2), t.draw(s2), t.draw(s2)], [true, false, true]);
});

test("uniform integers use rejection (no modulo bias)", () => {
  const words = [4294967295, 4294967294, 7];
  const src = { word: () => words.shift() };
  assert.equal(uniformInt(src, 3), 2); // 4294967295 >= limit (4294967295) is rejected; 4294967294 % 3 = 2
  assert.equal(uniformInt(src, 1), 0);
});

test("base64 round-trips and is strict", () => {
  for (let n = 0; n < 20; n++) {
    const b = globalThis.crypto.getRandomValues(new Uint8Array(n));
    assert.deepEqual(b64decode(b64encode(b)), b);
    assert.equal(b64encode(b), Buffer.from(b).toString("base64"));
  }
  assert.throws(() => b64decode("abc"), /base64/);
});

test("cells are located as privpub.client.locate_cells does", () => {
  const grid = { type: "grid", bounds: [0, 0, 10, 5], g: 4 };
  assert.equal(cellCount(grid), 16);
  assert.equal(locateCell(grid, 0, 0), 0);
  assert.equal(locateCell(grid, 10, 5), 15); // the top/right edge is closed
  assert.equal(locateCell(grid, 2.5, 0), 4); // half-open cells: an edge belongs to the next cell
  const intervals = { type: "intervals", axis: 1, edges: [0, 1, 2, 5] };
  assert.equal(locateCell(intervals, 9, 1), 1);
  const leaves = { type: "leaves", x0: [0, 0, 5], x1: [5, 5, 10], y0: [0, 2, 0], y1: [2, 5, 5] };
  assert.deepEqual([locateCell(leaves, 1, 1), locateCell(leaves, 1, 2), locateCell(leaves, 10, 5)], [0, 1, 2]);
});

test("OLH hashes as the server does", () => {
  assert.equal(olhHash(5, 7, 3, 4), ((5 * 3 + 7) % 2147483647) % 4);
  assert.equal(olhHash(2147483646, 2147483646, 999, 5), Number(((2147483646n * 999n + 2147483646n) % 2147483647n) % 5n));
});

test("reports have the declared widths and validate their inputs", () => {
  const oue = new Randomiser({ kind: "frequency", epsilon: 1, oracle: "OUE", categories: ["a", "b", "c"] });
  assert.equal(oue.report("a").length, 1);
  assert.equal(oue.report("a")[0] & 0xf8, 0); // padding bits stay 0
  assert.throws(() => oue.report("z"), /declared categories/);
  const olh = new Randomiser({ kind: "frequency", epsilon: 1, oracle: "OLH", categories: ["a", "b"], g: 4 });
  assert.equal(olh.report("b").length, 12);
  const sp = new Randomiser({ kind: "spatial", epsilon: 1, bounds: [0, 0, 1, 1], partition: { type: "grid", bounds: [0, 0, 1, 1], g: 3 } });
  assert.equal(sp.report([0.5, 0.5]).length, 2);
  assert.throws(() => sp.report([2, 0.5]), /inside the public bounds/);
  assert.throws(() => new Randomiser({ kind: "frequency", epsilon: 0, oracle: "OUE", categories: ["a", "b"] }), /epsilon/);
});

test("OUE frequencies follow the exact probabilities (p = 1/2, q = 1/(1+e))", () => {
  const r = new Randomiser({ kind: "frequency", epsilon: 1, oracle: "OUE", categories: ["a", "b"] });
  const n = 40000;
  let own = 0;
  let other = 0;
  for (let i = 0; i < n; i++) {
    const b = r.report("a")[0];
    own += b & 1;
    other += (b >> 1) & 1;
  }
  const q = 1 / (1 + Math.E);
  assert.ok(Math.abs(own - n / 2) < 5 * Math.sqrt(n / 4), `own ${own}`);
  assert.ok(Math.abs(other - n * q) < 5 * Math.sqrt(n * q * (1 - q)), `other ${other}`);
});

function fakeService(script) {
  const calls = [];
  const fetch = async (url, init) => {
    calls.push({ url, method: init.method, body: init.body ? JSON.parse(init.body) : undefined });
    const next = script.shift();
    if (next instanceof Error) throw next;
    return new Response(JSON.stringify(next.body ?? {}), { status: next.status ?? 200 });
  };
  return { fetch, calls };
}

const CONFIG = { kind: "frequency", epsilon: 1, oracle: "GRR", categories: ["a", "b"], payload: { layout: "uint32le" } };

test("submit retries idempotently with the same report id, then succeeds", async () => {
  const receipt = { campaign_id: "c1", report_id: "x", received: "2026-01-01T00:00:00Z" };
  const { fetch, calls } = fakeService([{ body: CONFIG }, { status: 503 }, new TypeError("network"), { body: receipt }]);
  const p = new Participant("http://h/", "c1", { fetch, sleep: async () => {}, token: "tok" });
  const r = await p.submit("a");
  assert.equal(r.queued, false);
  const posts = calls.filter((c) => c.method === "POST");
  assert.equal(posts.length, 3);
  assert.equal(new Set(posts.map((c) => c.body.report_id)).size, 1);
  assert.match(posts[0].body.report_id, /^[0-9a-f]{32}$/);
  assert.equal(posts[0].body.token, "tok");
  assert.equal(b64decode(posts[0].body.report).length, 4);
  assert.ok(!JSON.stringify(posts[0].body).includes('"a"')); // the value never leaves the device
});

test("offline reports queue to a file and flush later with the same id", async () => {
  const path = join(mkdtempSync(join(tmpdir(), "pp-")), "queue.jsonl");
  const { fetch, calls } = fakeService([{ body: CONFIG }, new TypeError("down"), new TypeError("down")]);
  const p = new Participant("http://h", "c1", { fetch, sleep: async () => {}, retries: 1, queue: new FileQueue(path) });
  const r = await p.submit("b");
  assert.equal(r.queued, true);
  const again = new Participant("http://h", "c1", {
    fetch: fakeService([{ body: { campaign_id: "c1", report_id: r.report_id, received: "t" } }]).fetch,
    queue: new FileQueue(path),
  });
  assert.equal(await again.pending(), 1);
  const done = await again.flush();
  assert.equal(done.length, 1);
  assert.equal(done[0].report_id, r.report_id);
  assert.equal(await again.pending(), 0);
  assert.equal(calls.length, 3);
});

test("a refused report is an error, not retried or queued", async () => {
  const { fetch } = fakeService([{ body: CONFIG }, { status: 409, body: { error: { message: "closed", field: "campaign" } } }]);
  const q = new MemoryQueue();
  const p = new Participant("http://h", "c1", { fetch, queue: q });
  await assert.rejects(p.submit("a"), (e) => e instanceof SubmissionError && e.status === 409 && e.field === "campaign");
  assert.equal(await p.pending(), 0);
  assert.ok(OfflineError);
});

test("a KDG-HT participant reports over its assigned group's partition", async () => {
  const cfg = { kind: "spatial", epsilon: 1, bounds: [0, 0, 1, 1], assigned: true, oracle: "OUE", payload: { layout: "bits" } };
  const assigned = {
    assignments: [{ assignment: "tok-1", group: 1 }],
    partitions: { 1: { type: "intervals", axis: 1, edges: [0, 0.25, 0.5, 0.75, 1, 1.0] } },
  };
  const { fetch, calls } = fakeService([{ body: cfg }, { body: assigned }, { body: { campaign_id: "c", report_id: "r", received: "t" } }]);
  await new Participant("http://h", "c", { fetch }).submit([0.3, 0.6]);
  assert.deepEqual(calls[1].body, { count: 1 });
  const sent = calls[2].body;
  assert.equal(sent.group, 1);
  assert.equal(sent.assignment, "tok-1");
  assert.equal(b64decode(sent.report).length, 1); // 5 cells -> 1 byte
});

test("the 8-bits-at-a-time sampler's tables equal privpub.ldp._unary._byte_sampler's", async () => {
  const { ByteSampler } = await import("../dist/node.js");
  // hash of the 65,536-entry prefix table, as computed from the Python library's table
  const PYTHON = { "1,2": 161892320n, "0.5,2": 364740717n, "8,2": 52927000n, "40,2": 16777216n };
  for (const [key, want] of Object.entries(PYTHON)) {
    const [e, k] = key.split(",").map(Number);
    const s = ByteSampler.of(flipProbability(e, k));
    let h = 0n;
    s.table.forEach((v, i) => { h = (h * 31n + BigInt(v) * BigInt(i + 1)) % 1000000007n; });
    assert.equal(h, want, key);
  }
  assert.equal(ByteSampler.of(flipProbability(8, 2)).ambBase.join(","), "0,1,2,4,8,16,32,64,68,128");
});

test("an ambiguous prefix is refined by further words of U", async () => {
  const { ByteSampler } = await import("../dist/node.js");
  const s = ByteSampler.of(flipProbability(8, 2));
  const a = 3; // an ambiguous prefix: the byte is ambBase[a] below its first boundary, more above
  const prefix = s.table.indexOf(256 + a);
  const first = s.ambBounds[a][0];
  const below = [prefix << 16, ...Array.from(first, (w, i) => (i === first.length - 1 ? w - 1 : w))];
  const out = new Uint8Array(1);
  s.fill(out, 0, 1, { word: () => below.shift() });
  assert.equal(out[0], s.ambBase[a]);
  const at = [prefix << 16, ...first, ...Array(40).fill(0xffffffff)];
  s.fill(out, 0, 1, { word: () => at.shift() ?? 0 });
  assert.ok(out[0] > s.ambBase[a]);
});
