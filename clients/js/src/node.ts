/** Node-only additions: an offline queue in a JSON-lines file. */
import { webcrypto } from "node:crypto";
import { readFile, rename, writeFile } from "node:fs/promises";
import type { QueuedReport, ReportQueue } from "./client.js";

export * from "./index.js";

// Node 18 has the Web Crypto API only as node:crypto's webcrypto (Node >= 19 also as the global)
if (globalThis.crypto === undefined) {
  Object.defineProperty(globalThis, "crypto", { value: webcrypto, configurable: true });
}

export class FileQueue implements ReportQueue {
  constructor(readonly path: string) {}

  async load(): Promise<QueuedReport[]> {
    try {
      const text = await readFile(this.path, "utf8");
      return text.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l) as QueuedReport);
    } catch (exc) {
      if ((exc as { code?: string }).code === "ENOENT") return [];
      throw exc;
    }
  }

  async save(items: QueuedReport[]): Promise<void> {
    const tmp = `${this.path}.tmp`;
    await writeFile(tmp, items.map((i) => JSON.stringify(i) + "\n").join(""));
    await rename(tmp, this.path);
  }
}
