/**
 * The device's randomness: the platform CSPRNG (crypto.getRandomValues), never Math.random.
 *
 * Every draw is exact: a Bernoulli(T / 2**k) compares uniform 32-bit words with the threshold's
 * words (the next word decides only on a tie), and a uniform integer uses rejection sampling.
 */
import { type Dyadic, thresholdWords } from "./dyadic.js";

const BUFFER_WORDS = 16384; // 64 KiB: the most one getRandomValues call may fill

export interface RandomSource {
  /** A uniform 32-bit word. */
  word(): number;
}

/** 32-bit words from crypto.getRandomValues, buffered. */
export class CryptoRandom implements RandomSource {
  private buf = new Uint32Array(BUFFER_WORDS);
  private pos = BUFFER_WORDS;

  word(): number {
    if (this.pos === BUFFER_WORDS) {
      globalThis.crypto.getRandomValues(this.buf);
      this.pos = 0;
    }
    return this.buf[this.pos++];
  }

  private bulk = new Uint32Array(BUFFER_WORDS);
  private bulkPos = BUFFER_WORDS;

  /**
   * `n <= 16384` fresh words at `buf[start, start + n)`, from a buffer of their own (word() never
   * refills it, so the block stays valid while it is read; unused words are skipped, never reused).
   */
  take(n: number): [Uint32Array, number] {
    if (this.bulkPos + n > BUFFER_WORDS) {
      globalThis.crypto.getRandomValues(this.bulk);
      this.bulkPos = 0;
    }
    const start = this.bulkPos;
    this.bulkPos += n;
    return [this.bulk, start];
  }
}

/** An exact Bernoulli(threshold) sampler. */
export class Bernoulli {
  private readonly words: Uint32Array;
  private readonly first: number;

  constructor(threshold: Dyadic) {
    this.words = thresholdWords(threshold);
    this.first = this.words[0];
  }

  draw(rng: RandomSource): boolean {
    const u = rng.word();
    if (u !== this.first) return u < this.first;
    for (let i = 1; i < this.words.length; i++) {
      const v = rng.word();
      if (v !== this.words[i]) return v < this.words[i];
    }
    return false; // U >= threshold
  }
}

/** A uniform integer in [0, n) for 1 <= n <= 2**32 (rejection sampling). */
export function uniformInt(rng: RandomSource, n: number): number {
  if (n <= 1) return 0;
  const limit = 4294967296 - (4294967296 % n);
  for (;;) {
    const u = rng.word();
    if (u < limit) return u % n;
  }
}

function popcount8(o: number): number {
  let c = 0;
  for (let x = o; x; x >>= 1) c += x & 1;
  return c;
}

/**
 * 8 i.i.d. Bernoulli(threshold) bits at a time, exactly, by inversion of the byte's law
 * (privpub.ldp._unary._byte_sampler): the cumulative sums C_o of P[byte = o] are integers over
 * 2**(8 k); a uniform 16-bit prefix of U decides the byte unless a boundary C_o falls inside the
 * prefix's interval (a fraction <= 255 / 65536 of prefixes), where further words of U decide.
 */
export class ByteSampler {
  private readonly table: Uint16Array; // prefix -> byte, or 256 + ambiguous index
  private readonly ambBase: number[] = [];
  private readonly ambBounds: Uint32Array[][] = []; // per ambiguous prefix: its boundaries' words
  private readonly extra: number[] = [];
  private static cache = new Map<string, ByteSampler>();

  static of(threshold: Dyadic): ByteSampler {
    const key = `${threshold.numerator}/${threshold.bits}`;
    let s = ByteSampler.cache.get(key);
    if (s === undefined) {
      s = new ByteSampler(threshold);
      ByteSampler.cache.set(key, s);
    }
    return s;
  }

  private constructor(threshold: Dyadic) {
    let num = threshold.numerator;
    let bits = threshold.bits;
    if (bits < 2) {
      num <<= BigInt(2 - bits);
      bits = 2;
    }
    const one = 1n << BigInt(bits);
    const weight: bigint[] = [];
    for (let c = 0; c <= 8; c++) weight.push(num ** BigInt(c) * (one - num) ** BigInt(8 - c));
    const shift = BigInt(8 * bits - 16);
    const mask = (1n << shift) - 1n;
    const nWords = Math.ceil(Number(shift) / 32);
    const pad = BigInt(32 * nWords) - shift;
    let cdf = 0n;
    const first = new Int32Array(255);
    const inside = new Map<number, bigint[]>();
    for (let o = 0; o < 255; o++) {
      cdf += weight[popcount8(o)];
      const prefix = Number(cdf >> shift);
      const rem = cdf & mask;
      first[o] = rem === 0n ? prefix : prefix + 1; // the first prefix starting at or after C_(o+1)
      if (rem !== 0n) {
        const list = inside.get(prefix) ?? [];
        list.push(rem);
        inside.set(prefix, list);
      }
    }
    const table = new Uint16Array(65536);
    for (let i = 0, k = 0; i < 65536; i++) {
      while (k < 255 && first[k] <= i) k++;
      table[i] = k;
    }
    for (const [prefix, rems] of [...inside.entries()].sort((a, b) => a[0] - b[0])) {
      this.ambBase.push(table[prefix]);
      this.ambBounds.push(rems.map((rem) => {
        const v = rem << pad;
        const words = new Uint32Array(nWords);
        for (let w = 0; w < nWords; w++) words[w] = Number((v >> BigInt(32 * (nWords - 1 - w))) & 0xffffffffn);
        return words;
      }));
      table[prefix] = 256 + this.ambBase.length - 1;
    }
    this.table = table;
  }

  /** The byte of an ambiguous prefix: further words of U against the boundaries inside it. */
  private refine(a: number, rng: RandomSource): number {
    const bounds = this.ambBounds[a];
    const u = this.extra;
    u.length = 0;
    let byte = this.ambBase[a];
    for (const b of bounds) {
      // U_rest >= b ? (lexicographic over words, drawing U's words lazily)
      let ge = true;
      for (let w = 0; w < b.length; w++) {
        if (w === u.length) u.push(rng.word());
        if (u[w] !== b[w]) {
          ge = u[w] > b[w];
          break;
        }
      }
      if (!ge) break;
      byte++;
    }
    return byte;
  }

  /** Fill `out[start, end)` with i.i.d. bytes of 8 Bernoulli bits. */
  fill(out: Uint8Array, start: number, end: number, rng: RandomSource): void {
    const table = this.table;
    let i = start;
    if (rng instanceof CryptoRandom) {  // whole words straight from the CSPRNG's buffer
      while (i + 1 < end) {
        const n = Math.min((end - i) >> 1, 4096);
        const [buf, at] = rng.take(n);
        for (let k = at; k < at + n; k++, i += 2) {
          const w = buf[k];
          const t0 = table[w >>> 16];
          const t1 = table[w & 0xffff];
          out[i] = t0 < 256 ? t0 : this.refine(t0 - 256, rng);
          out[i + 1] = t1 < 256 ? t1 : this.refine(t1 - 256, rng);
        }
      }
    }
    for (; i + 1 < end; i += 2) {
      const w = rng.word();
      const t0 = table[w >>> 16];
      const t1 = table[w & 0xffff];
      out[i] = t0 < 256 ? t0 : this.refine(t0 - 256, rng);
      out[i + 1] = t1 < 256 ? t1 : this.refine(t1 - 256, rng);
    }
    if (i < end) {
      const t = table[rng.word() >>> 16];
      out[i] = t < 256 ? t : this.refine(t - 256, rng);
    }
  }
}
