/** Node-only additions: an offline queue in a JSON-lines file. */
import { readFile, rename, writeFile } from "node:fs/promises";
import type { QueuedReport, ReportQueue } from "./client.js";

export * from "./index.js";

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
