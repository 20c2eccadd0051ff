/**
 * Named fault points for crash tests. `LAKESWAP_FAULT=<point>:kill` makes the
 * process SIGKILL itself when it reaches `<point>`; `<point>:error` throws
 * there instead. Several may be given, separated by ','. Unset in production.
 */
export type FaultPoint =
  | "lease-acquired"
  | "during-build"
  | "after-build"
  | "after-outbox"
  | "before-swap-rename"
  | "after-swap"
  | "after-manifest"
  | "during-gc"
  | "before-release";

/** Every fault point, in the order a replace reaches them. */
export const FAULT_POINTS: readonly FaultPoint[] = [
  "lease-acquired",
  "during-build",
  "after-build",
  "after-outbox",
  "before-swap-rename",
  "after-swap",
  "after-manifest",
  "during-gc",
  "before-release",
];

/** Stops the process at `point` when LAKESWAP_FAULT asks for it. */
export function faultPoint(point: FaultPoint): void {
  const spec = process.env.LAKESWAP_FAULT;
  if (!spec) return;
  for (const entry of spec.split(",")) {
    const [name, action = "kill"] = entry.trim().split(":");
    if (name !== point) continue;
    if (action === "kill") process.kill(process.pid, "SIGKILL");
    throw new Error(`fault injected at ${point}`);
  }
}
