import path from "node:path";
import { afterEach } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { openEmbeddedLake } from "../../src/open/open-lake.js";
import { tempDir } from "./lake-fixture.js";

/**
 * Fresh embedded lakes in temporary folders, each closed and removed after its
 * test. Call once at the top of a test file; the function it returns opens one
 * (with `openEmbeddedLake`, or `open` for lakes built from their own ports).
 */
export function tempLakes(): (open?: (lakeDir: string) => Promise<Lake>) => Promise<{ lake: Lake; lakeDir: string }> {
  const opened: { lake: Lake; cleanup: () => void }[] = [];
  afterEach(async () => {
    for (const { lake, cleanup } of opened.splice(0)) {
      await lake.close();
      cleanup();
    }
  });
  return async (open = (lakeDir) => openEmbeddedLake(lakeDir)) => {
    const { dir, cleanup } = tempDir();
    const lakeDir = path.join(dir, "lake");
    try {
      const lake = await open(lakeDir);
      opened.push({ lake, cleanup });
      return { lake, lakeDir };
    } catch (error) {
      cleanup();
      throw error;
    }
  };
}
