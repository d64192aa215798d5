/**
 * The local randomisers of every campaign kind, with the exact probabilities of privpub's Python
 * client (privpub.client.perturb_values): frequency GRR / OUE / SUE / OLH, synthetic-data RAPPOR
 * blocks, and spatial OUE over the cells of a public partition (UG grid, KDG-HT intervals/leaves).
 */
import { type Dyadic, complement, doubleToRational, dyadicUp, flipProbability } from "./dyadic.js";
import { Bernoulli, ByteSampler, CryptoRandom, type RandomSource, uniformInt } from "./random.js";
import { uint32le } from "./codec.js";

export const MAX_LOCAL_EPSILON = 40;
export const OLH_PRIME = 2147483647; // 2**31 - 1

export type Partition =
  | { type: "grid"; bounds: number[]; g: number }
  | { type: "intervals"; axis: number; edges: number[] }
  | { type: "leaves"; x0: number[]; x1: number[]; y0: number[]; y1: number[] };

export interface CampaignConfig {
  kind: "frequency" | "synth" | "spatial";
  epsilon: number;
  oracle?: string;
  categories?: string[];
  g?: number;
  schema?: { attributes: { name: string; categories: string[] }[] };
  flip_prob?: number;
  bounds?: number[];
  partition?: Partition;
  assigned?: boolean;
  payload?: { layout: string; bytes?: number };
  [key: string]: unknown;
}

export class DomainError extends Error {}

function checkEpsilon(eps: number): number {
  if (typeof eps !== "number" || !(eps > 0) || eps > MAX_LOCAL_EPSILON) {
    throw new RangeError(`epsilon must be in (0, ${MAX_LOCAL_EPSILON}], got ${eps}`);
  }
  return eps;
}

/** A unary encoding: `d` independent bits, P[1] = p on the own bit, q elsewhere. */
export class UnarySampler {
  private readonly own: Bernoulli;
  private readonly other: ByteSampler;
  readonly width: number;

  constructor(readonly d: number, p: Dyadic, q: Dyadic) {
    this.own = new Bernoulli(p);
    this.other = ByteSampler.of(q);
    this.width = (d + 7) >> 3;
  }

  /**
   * The packed report of value `v` (v = -1: every bit at q). Every bit is drawn at q, 8 at a time,
   * then the own bit is replaced by an independent Bernoulli(p) draw: the bits are independent, so
   * this is exactly the law of the unary encoding. Padding bits are 0.
   */
  report(v: number, rng: RandomSource, out: Uint8Array = new Uint8Array(this.width)): Uint8Array {
    this.other.fill(out, 0, this.width, rng);
    const tail = this.d & 7;
    if (tail) out[this.width - 1] &= (1 << tail) - 1;
    if (v >= 0) {
      const bit = 1 << (v & 7);
      if (this.own.draw(rng)) out[v >> 3] |= bit;
      else out[v >> 3] &= ~bit;
    }
    return out;
  }
}

/** OUE over d cells: p = 1/2, q = 1 / (1 + e^eps) rounded up. */
export function oue(d: number, epsilon: number): UnarySampler {
  return new UnarySampler(Math.max(d, 2), { numerator: 1n, bits: 1 }, flipProbability(checkEpsilon(epsilon), 2));
}

/** SUE (symmetric RAPPOR) over d cells at epsilon: q = f/2 = 1 / (1 + e^(eps/2)). */
export function sue(d: number, epsilon: number): UnarySampler {
  const q = flipProbability(checkEpsilon(epsilon) / 2, 2);
  return new UnarySampler(d, complement(q), q);
}

/** SUE with a declared flip probability f (synth campaigns): q = f/2 rounded up, exactly. */
export function sueFlip(d: number, f: number): UnarySampler {
  if (!(f > 0 && f < 1)) throw new RangeError(`flip_prob must be in (0, 1), got ${f}`);
  const { num, den } = doubleToRational(f);
  const q = dyadicUp(num, den * 2n);
  return new UnarySampler(d, complement(q), q);
}

/** Generalised randomised response over k values: keep with 1 - r, else a uniform other value. */
export class RandomisedResponse {
  private readonly flip: Bernoulli;
  constructor(readonly k: number, epsilon: number) {
    const r = flipProbability(checkEpsilon(epsilon), k);
    // p must exceed 1/k (as privpub's GRR/OLH require)
    if (r.numerator * BigInt(k) >= BigInt(k - 1) << BigInt(r.bits)) {
      throw new RangeError(`epsilon=${epsilon} is too small for randomised response over ${k} values`);
    }
    this.flip = new Bernoulli(r);
  }

  draw(v: number, rng: RandomSource): number {
    if (!this.flip.draw(rng)) return v;
    const other = uniformInt(rng, this.k - 1);
    return other >= v ? other + 1 : other;
  }
}

export function olhHash(a: number, b: number, x: number, g: number): number {
  return Number(((BigInt(a) * BigInt(x) + BigInt(b)) % BigInt(OLH_PRIME)) % BigInt(g));
}

// ---------------------------------------------------------------------------------------------
// Spatial: locate a point in the public partition
// ---------------------------------------------------------------------------------------------
function intervalIndex(edges: number[], v: number): number {
  // the largest i with edges[i] <= v, clamped to [0, m - 1] (numpy searchsorted side="right" - 1)
  let lo = 0;
  let hi = edges.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (edges[mid] <= v) lo = mid + 1;
    else hi = mid;
  }
  return Math.min(Math.max(lo - 1, 0), edges.length - 2);
}

function gridEdges(lo: number, hi: number, g: number): number[] {
  const step = (hi - lo) / g;
  const out: number[] = [];
  for (let i = 0; i <= g; i++) out.push(lo + i * step);
  out[g] = hi;
  return out;
}

export function cellCount(partition: Partition): number {
  if (partition.type === "grid") return partition.g * partition.g;
  if (partition.type === "intervals") return partition.edges.length - 1;
  if (partition.type === "leaves") return partition.x0.length;
  throw new Error(`unknown partition type ${(partition as { type: string }).type}`);
}

export function locateCell(partition: Partition, x: number, y: number): number {
  if (partition.type === "grid") {
    const [x0, y0, x1, y1] = partition.bounds;
    const g = partition.g;
    return intervalIndex(gridEdges(x0, x1, g), x) * g + intervalIndex(gridEdges(y0, y1, g), y);
  }
  if (partition.type === "intervals") {
    return intervalIndex(partition.edges, partition.axis === 0 ? x : y);
  }
  // leaves: the elementary grid of all leaf edges, half-open cells, the top/right edge closed
  const ux = [...new Set([...partition.x0, ...partition.x1])].sort((a, b) => a - b);
  const uy = [...new Set([...partition.y0, ...partition.y1])].sort((a, b) => a - b);
  const cx = intervalIndex(ux, x);
  const cy = intervalIndex(uy, y);
  const mx = (ux[cx] + ux[cx + 1]) / 2;
  const my = (uy[cy] + uy[cy + 1]) / 2;
  for (let k = 0; k < partition.x0.length; k++) {
    if (partition.x0[k] <= mx && mx < partition.x1[k] && partition.y0[k] <= my && my < partition.y1[k]) return k;
  }
  throw new DomainError("the point fell outside every leaf of the partition");
}

// ---------------------------------------------------------------------------------------------
// One report of one participant
// ---------------------------------------------------------------------------------------------
export type Value = string | number | [number, number] | Record<string, unknown>;

/** A randomiser bound to one configuration (and partition): reuse it for many reports. */
export class Randomiser {
  private readonly rng: RandomSource;
  private readonly fn: (value: Value) => Uint8Array;

  constructor(config: CampaignConfig, partition?: Partition, rng: RandomSource = new CryptoRandom()) {
    this.rng = rng;
    this.fn = build(config, partition, rng);
  }

  /** The wire payload of one participant's value. */
  report(value: Value): Uint8Array {
    return this.fn(value);
  }
}

function build(config: CampaignConfig, partition: Partition | undefined,
               rng: RandomSource): (value: Value) => Uint8Array {
  const eps = Number(config.epsilon);
  if (config.kind === "frequency") {
    const cats = (config.categories ?? []).map(String);
    const index = new Map(cats.map((c, i) => [c, i] as [string, number]));
    const code = (v: Value): number => {
      const i = index.get(String(v));
      if (i === undefined) throw new DomainError("the value is not one of the campaign's declared categories");
      return i;
    };
    const d = cats.length;
    if (config.oracle === "GRR") {
      const rr = new RandomisedResponse(d, eps);
      return (v) => uint32le([rr.draw(code(v), rng)]);
    }
    if (config.oracle === "OLH") {
      const g = Number(config.g);
      const rr = new RandomisedResponse(g, eps);
      return (v) => {
        const x = code(v);
        const a = 1 + uniformInt(rng, OLH_PRIME - 1);
        const b = uniformInt(rng, OLH_PRIME);
        return uint32le([a, b, rr.draw(olhHash(a, b, x, g), rng)]);
      };
    }
    if (config.oracle === "OUE" || config.oracle === "SUE") {
      const s = config.oracle === "OUE" ? oue(d, eps) : sue(d, eps);
      return (v) => s.report(code(v), rng);
    }
    throw new Error(`oracle must be one of GRR, OUE, SUE, OLH, got ${config.oracle}`);
  }
  if (config.kind === "synth") {
    const attrs = config.schema?.attributes ?? [];
    const f = Number(config.flip_prob);
    const blocks = attrs.map((a) => ({ name: a.name, index: new Map(a.categories.map((c, i) => [String(c), i] as [string, number])),
                                      sampler: sueFlip(a.categories.length, f) }));
    const bits = attrs.reduce((s, a) => s + a.categories.length, 0);
    const width = (bits + 7) >> 3;
    return (v) => {
      if (typeof v !== "object" || v === null || Array.isArray(v)) throw new DomainError("a synth value is a record");
      const rec = v as Record<string, unknown>;
      const extra = Object.keys(rec).filter((k) => !blocks.some((b) => b.name === k));
      if (extra.length) throw new DomainError(`values have fields the campaign does not declare: ${extra.join(", ")}`);
      const out = new Uint8Array(width);
      let pos = 0;
      for (const blk of blocks) {
        const i = blk.index.get(String(rec[blk.name]));
        if (i === undefined) throw new DomainError(`${blk.name}: not one of the declared categories`);
        const part = blk.sampler.report(i, rng);
        for (let j = 0; j < blk.sampler.d; j++, pos++) {
          if ((part[j >> 3] >> (j & 7)) & 1) out[pos >> 3] |= 1 << (pos & 7);
        }
      }
      return out;
    };
  }
  if (config.kind === "spatial") {
    const part = partition ?? config.partition;
    if (!part) throw new Error("a spatial campaign needs the partition of the participant's group");
    const [x0, y0, x1, y1] = (config.bounds ?? []).map(Number);
    const s = oue(cellCount(part), eps);
    return (v) => {
      const [x, y] = (v as number[]).map(Number);
      if (!Number.isFinite(x) || !Number.isFinite(y) || x < x0 || x > x1 || y < y0 || y > y1) {
        throw new DomainError(`the point must lie inside the public bounds [${x0}, ${y0}, ${x1}, ${y1}]`);
      }
      return s.report(locateCell(part, x, y), rng);
    };
  }
  throw new Error(`unknown campaign kind ${String(config.kind)}`);
}

/** One participant's report of `value` under `config` (and `partition`, for a spatial group). */
export function perturb(config: CampaignConfig, value: Value, partition?: Partition): Uint8Array {
  return new Randomiser(config, partition).report(value);
}
