/** privpub's browser and Node client: local-DP randomisation on the device, and submission. */
export { b64decode, b64encode, hex, newReportId } from "./codec.js";
export { type Dyadic, complement, doubleToRational, dyadicDown, dyadicUp, flipProbability, thresholdWords, toNumber } from "./dyadic.js";
export { Bernoulli, ByteSampler, CryptoRandom, type RandomSource, uniformInt } from "./random.js";
export {
  type CampaignConfig, DomainError, MAX_LOCAL_EPSILON, OLH_PRIME, type Partition, RandomisedResponse, Randomiser,
  UnarySampler, type Value, cellCount, locateCell, olhHash, oue, perturb, sue, sueFlip,
} from "./randomise.js";
export {
  IndexedDBQueue, MemoryQueue, OfflineError, Participant, type ParticipantOptions, type QueuedReport, type Receipt,
  type ReportQueue, SubmissionError,
} from "./client.js";
