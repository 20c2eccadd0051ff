// The model test's held syncs (docs/audits.md, issue 29): `sync --hold` stages every build and moves nothing;
// `publish SYNC_ID` moves each staged partition still at the run it was staged against and refuses the others;
// `discard SYNC_ID` drops the held sync. The sync to publish or discard is one of the model's held syncs.
import fc from "fast-check";
import { deliveryArbitrary, PlannedCommand, SyncCommand, type LakeCommand, type Step } from "./commands.js";
import type { LakeModel, ModelHeldSync } from "./model.js";

const publishActions = (json: unknown): Map<string, string> => {
  const result = json as { published?: { table: string; partition: string }[]; refused?: { table: string; partition: string }[] };
  return new Map([
    ...(result.published ?? []).map((p) => [`${p.table}/${p.partition}`, "published"] as const),
    ...(result.refused ?? []).map((p) => [`${p.table}/${p.partition}`, "refused"] as const),
  ]);
};

/** `lakeswap publish|discard <id>` of the model's held sync number `index` (modulo how many are held). */
class HeldSyncVerbCommand extends PlannedCommand {
  private chosen = "";
  constructor(readonly verb: "publish" | "discard", readonly index: number) {
    super();
  }
  override check(model: Readonly<LakeModel>): boolean {
    return model.held.length > 0;
  }
  plan(model: LakeModel): Step {
    const held = model.held[this.index % model.held.length] as ModelHeldSync;
    this.chosen = held.id;
    const expected = this.verb === "publish" ? model.publish(held) : model.discard(held);
    return { args: [this.verb, held.id, "--json"], expected, reported: this.verb === "publish" ? publishActions : undefined, writes: [] };
  }
  toString(): string {
    return `${this.verb} <held sync #${this.index}${this.chosen ? `: ${this.chosen}` : ""}>`;
  }
}

/** A held sync of a random delivery, and publish or discard of a held one. */
export function heldCommands(): fc.Arbitrary<LakeCommand>[] {
  return [
    // Also with a day the raw audit refuses: the layers below are built from the batch's other staged days
    // (test/pipeline/hold-audit.test.ts, the defect this model found).
    deliveryArbitrary.map((d) => new SyncCommand({ ...d, hold: true })),
    fc.nat({ max: 3 }).map((i) => new HeldSyncVerbCommand("publish", i)),
    fc.nat({ max: 3 }).map((i) => new HeldSyncVerbCommand("discard", i)),
  ];
}
