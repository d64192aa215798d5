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
