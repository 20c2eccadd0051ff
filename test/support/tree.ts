import { lstatSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import path from "node:path";

/** Every file and symlink under `root` with its content hash or link target: equal trees mean nothing changed. */
export function treeState(root: string): Record<string, string> {
  const state: Record<string, string> = {};
  const walk = (dir: string): void => {
    let entries: string[];
    try {
      entries = readdirSync(dir);
    } catch {
      return;
    }
    for (const name of entries) {
      const full = path.join(dir, name);
      const rel = path.relative(root, full);
      const stat = lstatSync(full);
      if (stat.isSymbolicLink()) state[rel] = `-> ${readlinkSync(full)}`;
      else if (stat.isDirectory()) walk(full);
      else state[rel] = `${stat.size}:${readFileSync(full).subarray(0, 64).toString("hex")}`;
    }
  };
  walk(root);
  return state;
}
