// The environment of child processes while an in-process command (main-cli.ts) has set variables for its call: a
// child that a concurrent test starts meanwhile must not see them (another lake's AWS target, a grace window of 0).

/** The variables an in-process command set for its call, with the values they had before it. */
const overridden = new Map<string, string | undefined>();

/** Sets `env` in this process's environment for one call; `restoreEnvironment` undoes it. */
export function overrideEnvironment(env: Readonly<Record<string, string | undefined>>): void {
  for (const [key, value] of Object.entries(env)) {
    if (!overridden.has(key)) overridden.set(key, process.env[key]);
    setVariable(key, value);
  }
}

/** Puts back what `overrideEnvironment` changed. */
export function restoreEnvironment(): void {
  for (const [key, value] of overridden) setVariable(key, value);
  overridden.clear();
}

/** This process's environment as it is outside any in-process command's call, with `extra` on top: for a child process. */
export function childEnvironment(extra: Readonly<Record<string, string>> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const [key, value] of overridden) {
    if (value === undefined) delete env[key];
    else env[key] = value;
  }
  return { ...env, ...extra };
}

function setVariable(key: string, value: string | undefined): void {
  if (value === undefined) delete process.env[key];
  else process.env[key] = value;
}
