/**
 * A participant's device: fetch the campaign's public configuration, randomise on the device and
 * submit only the report, under a fresh random 128-bit report id. Failed uploads are retried with
 * exponential back-off (a resend reuses the id, so the server stores the report once); a report
 * that still cannot be sent waits in an offline queue holding the *perturbed* payload, never the
 * value, and flush() sends it later. A value is never randomised twice.
 */
import { b64encode, newReportId } from "./codec.js";
import { type CampaignConfig, type Partition, Randomiser, type Value } from "./randomise.js";

const RETRY_STATUS = new Set([408, 425, 429, 500, 502, 503, 504]);

export interface QueuedReport {
  report_id: string;
  report: string;
  group: number;
  token?: string;
  assignment?: string;
}

/** Where reports that could not be sent wait (perturbed payloads only). */
export interface ReportQueue {
  load(): Promise<QueuedReport[]>;
  save(items: QueuedReport[]): Promise<void>;
}

export class MemoryQueue implements ReportQueue {
  private items: QueuedReport[] = [];
  async load(): Promise<QueuedReport[]> {
    return [...this.items];
  }
  async save(items: QueuedReport[]): Promise<void> {
    this.items = [...items];
  }
}

/** A queue in the browser's IndexedDB (one record under `key`). */
export class IndexedDBQueue implements ReportQueue {
  constructor(private readonly key = "privpub-queue", private readonly dbName = "privpub") {}

  private open(): Promise<IDBDatabase> {
    return new Promise((resolve, reject) => {
      const req = indexedDB.open(this.dbName, 1);
      req.onupgradeneeded = () => req.result.createObjectStore("queue");
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
  }

  async load(): Promise<QueuedReport[]> {
    const db = await this.open();
    return new Promise((resolve, reject) => {
      const req = db.transaction("queue", "readonly").objectStore("queue").get(this.key);
      req.onsuccess = () => resolve((req.result as QueuedReport[] | undefined) ?? []);
      req.onerror = () => reject(req.error);
    });
  }

  async save(items: QueuedReport[]): Promise<void> {
    const db = await this.open();
    return new Promise((resolve, reject) => {
      const tx = db.transaction("queue", "readwrite");
      tx.objectStore("queue").put(items, this.key);
      tx.oncomplete = () => resolve();
      tx.onerror = () => reject(tx.error);
    });
  }
}

export class SubmissionError extends Error {
  constructor(readonly status: number, message: string, readonly field?: string) {
    super(`${status}: ${message}${field ? ` (field '${field}')` : ""}`);
  }
}

export class OfflineError extends Error {}

export interface Receipt {
  campaign_id: string;
  report_id: string;
  received: string | null;
  queued: boolean;
}

export interface ParticipantOptions {
  token?: string;
  retries?: number;
  backoff?: number; // seconds
  maxBackoff?: number;
  queue?: ReportQueue;
  fetch?: typeof fetch;
  sleep?: (seconds: number) => Promise<void>;
}

export class Participant {
  readonly baseUrl: string;
  private config_: CampaignConfig | null = null;
  private readonly opts: Required<Omit<ParticipantOptions, "token">> & { token?: string };

  constructor(baseUrl: string, readonly campaignId: string, options: ParticipantOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.opts = {
      token: options.token,
      retries: options.retries ?? 5,
      backoff: options.backoff ?? 0.2,
      maxBackoff: options.maxBackoff ?? 5,
      queue: options.queue ?? new MemoryQueue(),
      fetch: options.fetch ?? globalThis.fetch.bind(globalThis),
      sleep: options.sleep ?? ((s) => new Promise((r) => setTimeout(r, s * 1000))),
    };
  }

  private async request(method: string, path: string, body?: unknown): Promise<unknown> {
    let delay = this.opts.backoff;
    let last = "";
    for (let attempt = 0; attempt <= this.opts.retries; attempt++) {
      try {
        const resp = await this.opts.fetch(this.baseUrl + path, {
          method,
          headers: body === undefined ? {} : { "content-type": "application/json" },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        if (resp.status < 400) return await resp.json();
        if (!RETRY_STATUS.has(resp.status)) {
          let err: { message?: string; field?: string } = {};
          try {
            err = ((await resp.json()) as { error?: typeof err }).error ?? {};
          } catch {
            /* not JSON */
          }
          throw new SubmissionError(resp.status, err.message ?? resp.statusText, err.field);
        }
        last = `HTTP ${resp.status}`;
        const retryAfter = Number(resp.headers.get("retry-after"));
        if (Number.isFinite(retryAfter) && retryAfter > 0) delay = Math.max(delay, retryAfter);
      } catch (exc) {
        if (exc instanceof SubmissionError) throw exc;
        last = String(exc);
      }
      if (attempt < this.opts.retries) {
        const jitter = 0.5 + globalThis.crypto.getRandomValues(new Uint32Array(1))[0] / 2 ** 32;
        await this.opts.sleep(Math.min(this.opts.maxBackoff, delay) * jitter);
        delay = Math.min(this.opts.maxBackoff, delay * 2);
      }
    }
    throw new OfflineError(`${method} ${path} failed after ${this.opts.retries + 1} attempts (${last})`);
  }

  /** The campaign's public configuration (fetched once). */
  async config(): Promise<CampaignConfig> {
    if (this.config_ === null) {
      this.config_ = (await this.request("GET", `/campaigns/${this.campaignId}`)) as CampaignConfig;
    }
    return this.config_;
  }

  /** Randomise `value` on the device, upload the report, return the receipt (queued if offline). */
  async submit(value: Value): Promise<Receipt> {
    const cfg = await this.config();
    const item: QueuedReport = { report_id: "", report: "", group: 0 };
    let partition: Partition | undefined = cfg.partition;
    if (cfg.kind === "spatial" && cfg.assigned) {
      const got = (await this.request("POST", `/campaigns/${this.campaignId}/assignments`, { count: 1 })) as {
        assignments: { assignment: string; group: number }[];
        partitions: Record<string, Partition>;
      };
      const a = got.assignments[0];
      item.group = Number(a.group);
      item.assignment = a.assignment;
      partition = got.partitions[String(a.group)];
    }
    const payload = new Randomiser(cfg, partition).report(value);
    return this.submitPayload(payload, item.group, item.assignment);
  }

  /**
   * Upload a report already randomised on this device (e.g. one shown to the participant before
   * sending: never randomise a value twice). Same retries, id and queue as submit().
   */
  async submitPayload(payload: Uint8Array, group = 0, assignment?: string): Promise<Receipt> {
    const item: QueuedReport = { report_id: newReportId(), report: b64encode(payload), group };
    if (assignment !== undefined) item.assignment = assignment;
    if (this.opts.token !== undefined) item.token = this.opts.token;
    return this.send(item);
  }

  private async send(item: QueuedReport): Promise<Receipt> {
    try {
      const body = (await this.request("POST", `/campaigns/${this.campaignId}/reports`, item)) as Receipt;
      return { campaign_id: body.campaign_id, report_id: body.report_id, received: body.received, queued: false };
    } catch (exc) {
      if (!(exc instanceof OfflineError)) throw exc;
      const q = await this.opts.queue.load();
      q.push(item);
      await this.opts.queue.save(q);
      return { campaign_id: this.campaignId, report_id: item.report_id, received: null, queued: true };
    }
  }

  /** Reports waiting in the offline queue. */
  async pending(): Promise<number> {
    return (await this.opts.queue.load()).length;
  }

  /** Send the queued reports (same ids: stored once); those still unsendable stay queued. */
  async flush(): Promise<Receipt[]> {
    const done: Receipt[] = [];
    const rest: QueuedReport[] = [];
    for (const item of await this.opts.queue.load()) {
      try {
        const body = (await this.request("POST", `/campaigns/${this.campaignId}/reports`, item)) as Receipt;
        done.push({ ...body, queued: false });
      } catch (exc) {
        if (!(exc instanceof OfflineError)) throw exc;
        rest.push(item);
      }
    }
    await this.opts.queue.save(rest);
    return done;
  }
}
