/** One target of issue 10, 11 or 12, judged from a measured figure: met, not met, or undecided (not measured, or stopped before it could tell). */
export interface Verdict {
  /** What is measured, e.g. "first load · lakeswap sync / raw COPY". */
  readonly measure: string;
  /** The target, as the issue states it, e.g. "≤ 1.50×". */
  readonly target: string;
  /** The measured figure as printed, e.g. "3.41×". */
  readonly measured: string;
  readonly met: boolean | undefined;
  /** Why it is undecided, or what else the reader must know. */
  readonly note?: string;
}

/** A ratio that must be at most `limit` (a lower bound `atLeast` when the run was stopped early: only "not met" can follow from it). */
export function ratioAtMost(measure: string, value: number | undefined, limit: number, options: { lowerBound?: boolean; note?: string } = {}): Verdict {
  const target = `≤ ${limit.toFixed(2)}×`;
  if (value === undefined || !Number.isFinite(value)) return { measure, target, measured: "not measured", met: undefined, note: options.note };
  if (options.lowerBound) {
    return { measure, target, measured: `> ${value.toFixed(2)}×`, met: value > limit ? false : undefined, note: options.note };
  }
  return { measure, target, measured: `${value.toFixed(2)}×`, met: value <= limit, note: options.note };
}

/** A ratio that must be at least `limit`. */
export function ratioAtLeast(measure: string, value: number | undefined, limit: number, note?: string): Verdict {
  const target = `≥ ${limit.toFixed(2)}×`;
  if (value === undefined || !Number.isFinite(value)) return { measure, target, measured: "not measured", met: undefined, note };
  return { measure, target, measured: `${value.toFixed(2)}×`, met: value >= limit, note };
}

/** A count that must be at most `limit` at every measured point (e.g. at N = 100 and N = 1,000). */
export function countAtMost(measure: string, points: readonly { readonly label: string; readonly count: number | undefined; readonly limit: number }[], note?: string): Verdict {
  const target = points.map((p) => `≤ ${p.limit} at ${p.label}`).join(", ");
  const measured = points.map((p) => `${p.count ?? "—"} at ${p.label}`).join(", ");
  const counted = points.filter((p) => p.count !== undefined);
  if (counted.some((p) => (p.count as number) > p.limit)) return { measure, target, measured, met: false, note };
  if (counted.length < points.length) return { measure, target, measured, met: undefined, note: note ?? "not every point was measured" };
  return { measure, target, measured, met: true, note };
}

/** A verdict on one line: "measure  target ≥ 20.00×  measured 31.20×  MET", and its note. */
export function verdictLine(verdict: Verdict): string {
  const measured = verdict.measured === "not measured" ? "not measured" : `measured ${verdict.measured}`;
  return `${verdict.measure}  target ${verdict.target}  ${measured}  ${verdictWord(verdict.met)}${verdict.note ? `  (${verdict.note})` : ""}`;
}

/** MET, NOT MET or UNDECIDED. */
export function verdictWord(met: boolean | undefined): string {
  return met === undefined ? "UNDECIDED" : met ? "MET" : "NOT MET";
}

/** A ratio that must be below `limit` (strictly), e.g. "< 1.00× (faster than a rewrite)" where `meaning` says what staying below means. */
export function ratioBelow(measure: string, value: number | undefined, limit: number, meaning: string, note?: string): Verdict {
  const target = `< ${limit.toFixed(2)}× (${meaning})`;
  if (value === undefined || !Number.isFinite(value)) return { measure, target, measured: "not measured", met: undefined, note };
  return { measure, target, measured: `${value.toFixed(2)}×`, met: value < limit, note };
}

/** A quantity that must be at least `limit`, printed with its unit, e.g. "≥ 100,000 events/s per core". */
export function quantityAtLeast(measure: string, value: number | undefined, limit: number, unit: string, note?: string): Verdict {
  const shown = (n: number): string => `${Math.round(n).toLocaleString("en-US")} ${unit}`;
  const target = `≥ ${shown(limit)}`;
  if (value === undefined || !Number.isFinite(value)) return { measure, target, measured: "not measured", met: undefined, note };
  return { measure, target, measured: shown(value), met: value >= limit, note };
}
