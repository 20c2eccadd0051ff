// Vitest global setup: the run's processes start without NODE_EXTRA_CA_CERTS. Where it is set (this machine sets it to
// the system's CA bundle), Node parses every certificate in the file as it starts, before any script runs: 48 ms of
// CPU in each of the several hundred processes the suite starts (CLI children, helper scripts, emulators, workers;
// `node -e 0` takes 74 ms with it and 25 ms without). The suite talks to its own emulators and PostgreSQL over plain
// HTTP and TCP, so no process of it needs another certificate. The workers and every process they start inherit the
// environment as it is after the global setup.
const NAME = "NODE_EXTRA_CA_CERTS";

export default function noExtraCaCerts(): () => void {
  const before = process.env[NAME];
  delete process.env[NAME];
  return () => {
    if (before !== undefined) process.env[NAME] = before;
  };
}
