/**
 * Exact dyadic response probabilities, bit for bit the ones of privpub's Python randomisers
 * (privpub.ldp._base: flip_probability, dyadic_up, dyadic_down).
 *
 * A probability is realised as numerator / 2**bits with a 32-bit numerator
 * (2**31 <= numerator < 2**32). The small response probability is rounded up (the large one down),
 * so the realised privacy loss never exceeds epsilon. e**epsilon is computed in 512-bit fixed point
 * with BigInt; a directed rounding margin of 2**-400 makes the rounding safe.
 */

export interface Dyadic {
  numerator: bigint;
  bits: number;
}

const P = 512n; // fixed-point fraction bits
const ONE = 1n << P;
const SIGNIFICANT_BITS = 32;
const MARGIN_SHIFT = 400n;

/** The exact value of a finite double as a fraction m / 2**s (s >= 0) or an integer m * 2**e. */
export function doubleToRational(x: number): { num: bigint; den: bigint } {
  if (!Number.isFinite(x)) throw new RangeError(`not a finite number: ${x}`);
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  const hi = view.getUint32(0);
  const lo = view.getUint32(4);
  const sign = hi >>> 31 ? -1n : 1n;
  const expBits = (hi >>> 20) & 0x7ff;
  let mant = (BigInt(hi & 0xfffff) << 32n) | BigInt(lo);
  let exp: number;
  if (expBits === 0) {
    exp = -1074;
  } else {
    mant |= 1n << 52n;
    exp = expBits - 1075;
  }
  if (exp >= 0) return { num: sign * (mant << BigInt(exp)), den: 1n };
  return { num: sign * mant, den: 1n << BigInt(-exp) };
}

/** e**x in fixed point (times 2**P), for 0 <= x <= 64. */
function expFixed(x: number): bigint {
  const { num, den } = doubleToRational(x);
  const reduce = 10n; // exp(x) = exp(x / 2**10) ** (2**10)
  const y = (num << P) / (den << reduce);
  let term = ONE;
  let sum = ONE;
  for (let n = 1n; n < 200n; n++) {
    term = (term * y) / (ONE * n);
    if (term === 0n) break;
    sum += term;
  }
  for (let i = 0n; i < reduce; i++) sum = (sum * sum) >> P;
  return sum;
}

/** Round num/den in (0, 1) to 32 significant bits, up or down (Python's _to_dyadic). */
export function toDyadic(num: bigint, den: bigint, up: boolean): Dyadic {
  if (!(num > 0n && num < den)) throw new RangeError("a response probability must lie in (0, 1)");
  let lead = 0;
  while (num << BigInt(lead + 1) < den) lead++;
  let bits = SIGNIFICANT_BITS + lead;
  const scaled = num << BigInt(bits);
  let q = scaled / den;
  if (up && q * den !== scaled) q += 1n;
  if (q === 1n << BigInt(SIGNIFICANT_BITS)) {
    q >>= 1n;
    bits -= 1;
  }
  return { numerator: q, bits };
}

/** The smallest 32-significant-bit dyadic >= num/den (exact rationals). */
export function dyadicUp(num: bigint, den: bigint): Dyadic {
  return toDyadic(num, den, true);
}

/** The largest 32-significant-bit dyadic <= num/den (exact rationals). */
export function dyadicDown(num: bigint, den: bigint): Dyadic {
  return toDyadic(num, den, false);
}

export function complement(d: Dyadic): Dyadic {
  return { numerator: (1n << BigInt(d.bits)) - d.numerator, bits: d.bits };
}

/**
 * Randomised response over k outputs: r = (k - 1) / (e**eps + k - 1), rounded up (or 1 - r rounded
 * down when r > 1/2), exactly as privpub.ldp._base.flip_probability.
 */
export function flipProbability(epsilon: number, k: number): Dyadic {
  const e = expFixed(epsilon);
  const km1 = BigInt(k - 1) << P;
  const total = e + km1;
  if (km1 <= e) {
    // approximate value: widen by the margin in the rounding direction
    return toDyadic(km1 + (km1 >> MARGIN_SHIFT) + 1n, total, true);
  }
  const down = e - (e >> MARGIN_SHIFT) - 1n;
  return complement(toDyadic(down, total, false));
}

/** The threshold as 32-bit words, most significant first (U < threshold iff U's words are smaller). */
export function thresholdWords(d: Dyadic): Uint32Array {
  const nWords = Math.max(1, Math.ceil(d.bits / 32));
  const value = d.numerator << BigInt(32 * nWords - d.bits);
  const out = new Uint32Array(nWords);
  for (let i = 0; i < nWords; i++) {
    out[i] = Number((value >> BigInt(32 * (nWords - 1 - i))) & 0xffffffffn);
  }
  return out;
}

export function toNumber(d: Dyadic): number {
  return Number(d.numerator) / 2 ** d.bits;
}
