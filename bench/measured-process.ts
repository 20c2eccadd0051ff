import { spawn } from "node:child_process";
import { existsSync, promises as fs, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";

/** GNU time, which reports a child's peak RSS exactly (from wait4's rusage); polling /proc is the fallback. */
const GNU_TIME = "/usr/bin/time";

/** How peak RSS was measured. */
export type RssMethod = "gnu-time" | "proc-polling";

/** One child process, measured from the outside. */
export interface MeasuredRun {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  /** Wall time from spawn to exit, as a user waiting at a prompt sees it. */
  readonly wallMs: number;
  /** Peak resident set size of the process, in bytes (NaN when it could not be measured). */
  readonly peakRssBytes: number;
  /** User plus system CPU time of the process and its children, in ms (GNU time's %U + %S; NaN without GNU time). */
  readonly cpuMs: number;
  readonly rssMethod: RssMethod;
  /** The process was stopped because it ran past its time limit. */
  readonly timedOut: boolean;
}

/** Options of one measured run. */
export interface MeasuredOptions {
  readonly cwd: string;
  /** Added to this process's environment. */
  readonly env?: Readonly<Record<string, string>>;
  /** Stop the process (SIGINT, then SIGKILL 10 s later) after this long; default: no limit. */
  readonly timeoutMs?: number;
}

/**
 * Runs `command args` as a child process and measures its wall time and peak
 * RSS: with GNU time (`/usr/bin/time -f %M`) where present, else by polling
 * VmHWM in /proc/<pid>/status every 20 ms (which may miss growth in the last
 * few milliseconds). Never throws on a non-zero exit: the caller judges it.
 */
export async function runMeasured(command: string, args: readonly string[], options: MeasuredOptions): Promise<MeasuredRun> {
  const useTime = existsSync(GNU_TIME);
  const timeFile = path.join(os.tmpdir(), `lakeswap-bench-time-${process.pid}-${Math.random().toString(16).slice(2)}.txt`);
  const [file, argv] = useTime ? [GNU_TIME, ["-f", "%M %U %S", "-o", timeFile, command, ...args]] : [command, [...args]];
  const started = performance.now();
  const child = spawn(file, argv, {
    cwd: options.cwd,
    env: { ...process.env, NODE_NO_WARNINGS: "1", ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));

  let polledPeakKb = 0;
  const poller = useTime
    ? undefined
    : setInterval(() => {
        const kb = readVmHwmKb(child.pid);
        if (kb > polledPeakKb) polledPeakKb = kb;
      }, 20);
  let timedOut = false;
  let killer: NodeJS.Timeout | undefined;
  const limit =
    options.timeoutMs === undefined
      ? undefined
      : setTimeout(() => {
          timedOut = true;
          // SIGINT first: lakeswap stops its builds and leaves every pointer where it was (exit 130).
          signalTree(child.pid, "SIGINT", useTime);
          killer = setTimeout(() => signalTree(child.pid, "SIGKILL", useTime), 10_000);
        }, options.timeoutMs);
  const { code, signal } = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (exitCode, exitSignal) => resolve({ code: exitCode, signal: exitSignal }));
  });
  const wallMs = performance.now() - started;
  if (poller) clearInterval(poller);
  if (limit) clearTimeout(limit);
  if (killer) clearTimeout(killer);

  let peakRssBytes = Number.NaN;
  let cpuMs = Number.NaN;
  if (useTime) {
    const text = await fs.readFile(timeFile, "utf8").catch(() => "");
    await fs.rm(timeFile, { force: true });
    // GNU time writes "Command exited with non-zero status N" before the figures when the command fails.
    const [kb, user, system] = (text.trim().split("\n").at(-1) ?? "").split(" ").map(Number) as [number, number, number];
    if (Number.isFinite(kb) && kb > 0) peakRssBytes = kb * 1024;
    if (Number.isFinite(user) && Number.isFinite(system)) cpuMs = (user + system) * 1000;
  } else if (polledPeakKb > 0) {
    peakRssBytes = polledPeakKb * 1024;
  }
  return { code, signal, stdout, stderr, wallMs, peakRssBytes, cpuMs, rssMethod: useTime ? "gnu-time" : "proc-polling", timedOut };
}

/** The peak RSS (VmHWM) of a live process in kB, or 0 if it is gone. */
function readVmHwmKb(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const match = /^VmHWM:\s+(\d+)\s+kB$/m.exec(status);
    return match ? Number(match[1]) : 0;
  } catch {
    return 0;
  }
}

/** Sends a signal to the measured process: under GNU time, to time's child (time itself forwards nothing). */
function signalTree(pid: number | undefined, signal: NodeJS.Signals, underTime: boolean): void {
  if (pid === undefined) return;
  const targets = underTime ? childrenOf(pid) : [pid];
  for (const target of targets.length > 0 ? targets : [pid]) {
    try {
      process.kill(target, signal);
    } catch {
      // Already gone.
    }
  }
}

/** The direct children of a process, from /proc/<pid>/task/<pid>/children. */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}
