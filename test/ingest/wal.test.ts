import { spawn } from "node:child_process";
import fs from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it, vi } from "vitest";
import { crc32c, crc32cPortable, nativeCrc32c } from "../../src/ingest/wal/crc32c.js";
import { recordFsyncs } from "../support/fsync-spy.js";
import { startSyncer } from "../../src/ingest/wal/wal-sync.js";
import { WriteAheadLog, type WalOptions } from "../../src/ingest/wal/write-ahead-log.js";
import { WAL_MAX_PAYLOAD_BYTES, type WalCorruption, type WalPosition, type WalRecord } from "../../src/ingest/wal/framing.js";
import { BusyShare } from "../../src/ingest/wal/busy-share.js";

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const WAL_MODULE = path.join(REPO_ROOT, "src/ingest/wal/write-ahead-log.ts");

const folders: string[] = [];
const logs: WriteAheadLog[] = [];

afterEach(async () => {
  vi.restoreAllMocks();
  for (const log of logs.splice(0)) await log.close();
  for (const folder of folders.splice(0)) fs.rmSync(folder, { recursive: true, force: true });
});

function tempFolder(): string {
  const folder = fs.mkdtempSync(path.join(tmpdir(), "lakeswap-wal-"));
  folders.push(folder);
  return folder;
}

function options(dir: string, overrides: Partial<WalOptions> = {}): WalOptions {
  return { dir, segmentMaxBytes: 1 << 20, segmentMaxAgeMs: 60_000, maxBytes: 1 << 30, ...overrides };
}

async function openLog(dir: string, overrides: Partial<WalOptions> = {}): Promise<WriteAheadLog> {
  const log = await WriteAheadLog.open(options(dir, overrides));
  logs.push(log);
  return log;
}

async function closeLog(log: WriteAheadLog): Promise<void> {
  await log.close();
  logs.splice(logs.indexOf(log), 1);
}

/** Deterministic bytes of varied length (0 to 1,500) for record `n`, so any record can be checked alone. */
function payloadOf(n: number, size = (n * 7919) % 1501): Buffer {
  const payload = Buffer.alloc(size);
  let state = (n * 2654435761 + 1) >>> 0;
  for (let i = 0; i < size; i += 1) {
    state = (state * 1103515245 + 12345) >>> 0;
    payload[i] = state >>> 24;
  }
  return payload;
}

/**
 * Holds every fdatasync on libuv's pool (the log's default syncer) until `release()`; then each runs, but the n-th
 * (from 1) fails with EIO where `fails(n)`. `started()` resolves once the first has been called.
 */
function holdFdatasyncs(fails: (n: number) => boolean = () => false): { release: () => void; started: () => Promise<void> } {
  const realFdatasync = fs.fdatasync;
  let release = () => {};
  const gate = new Promise<void>((resolve) => (release = resolve));
  let calls = 0;
  vi.spyOn(fs, "fdatasync").mockImplementation(((fd: number, done: (error: NodeJS.ErrnoException | null) => void) => {
    const n = (calls += 1);
    void gate.then(() => (fails(n) ? done(Object.assign(new Error("EIO: i/o error, fdatasync"), { code: "EIO" })) : realFdatasync(fd, done)));
  }) as typeof fs.fdatasync);
  const started = async (): Promise<void> => {
    while (calls === 0) await new Promise((resolve) => setImmediate(resolve));
  };
  return { release, started };
}

async function readAll(log: WriteAheadLog): Promise<{ records: WalRecord[]; corrupt: WalCorruption[] }> {
  const records: WalRecord[] = [];
  const corrupt: WalCorruption[] = [];
  for (const segment of log.sealed()) {
    const read = await log.read(segment);
    records.push(...read.records);
    corrupt.push(...read.corrupt);
  }
  return { records, corrupt };
}

function segmentFiles(dir: string): string[] {
  return fs.readdirSync(dir).filter((name) => /^\d+\.(open|sealed)$/.test(name)).sort();
}

function diskBytes(dir: string): number {
  return segmentFiles(dir).reduce((sum, name) => sum + fs.statSync(path.join(dir, name)).size, 0);
}

/** The frame of a record as the log writes it: u32 LE length, u32 LE CRC-32C of (length bytes + payload), payload. */
function frame(payload: Buffer): Buffer {
  const header = Buffer.alloc(8);
  header.writeUInt32LE(payload.length, 0);
  header.writeUInt32LE(crc32c(payload, crc32c(header.subarray(0, 4))), 4);
  return Buffer.concat([header, payload]);
}

/** The CRC-32C computed bit by bit, as the reference for the table-driven one. */
function crc32cBitwise(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (const byte of bytes) {
    crc ^= byte;
    for (let bit = 0; bit < 8; bit += 1) crc = crc & 1 ? (crc >>> 1) ^ 0x82f63b78 : crc >>> 1;
  }
  return ~crc >>> 0;
}

describe("BusyShare", () => {
  it("weighs busy time by how recent it is: 1 - 1/e after one time constant busy, then 1/e of that after one idle", () => {
    const share = new BusyShare(100, 0);
    expect(share.at(50)).toBe(0);
    share.set(true, 0);
    expect(share.at(100)).toBeCloseTo(1 - Math.exp(-1), 12);
    share.set(false, 100);
    expect(share.at(200)).toBeCloseTo((1 - Math.exp(-1)) * Math.exp(-1), 12);
    // Marks in between change nothing by themselves: the same busy stretch cut in two gives the same share.
    const cut = new BusyShare(100, 0);
    cut.set(true, 0);
    cut.set(true, 40);
    expect(cut.at(100)).toBeCloseTo(1 - Math.exp(-1), 12);
    // Busy almost all the time: near 1.
    const loaded = new BusyShare(250, 0);
    for (let t = 0; t < 1000; t += 10) {
      loaded.set(true, t);
      loaded.set(false, t + 9.5);
    }
    expect(loaded.at(1000)).toBeGreaterThan(0.9);
    expect(loaded.at(1000)).toBeLessThan(1);
  });
});

describe("crc32c", () => {
  it("gives the standard check value and the RFC 3720 vectors", () => {
    expect(crc32c(Buffer.from("123456789"))).toBe(0xe3069283);
    expect(crc32c(Buffer.alloc(32))).toBe(0x8a9136aa);
    expect(crc32c(Buffer.alloc(32, 0xff))).toBe(0x62a8ab43);
    expect(crc32c(Buffer.from(Array.from({ length: 32 }, (_, i) => i)))).toBe(0x46dd794e);
    expect(crc32c(Buffer.alloc(0))).toBe(0);
  });

  it("agrees with the bitwise definition on any bytes, range and split, natively and in plain JavaScript", () => {
    // Here the native module (@node-rs/crc32) has a prebuilt binary: both forms are checked.
    expect(nativeCrc32c).toBeDefined();
    for (const crc of [crc32c, crc32cPortable]) {
      for (let n = 0; n < 300; n += 1) {
        const bytes = payloadOf(n, n % 97);
        const start = n % 5 <= bytes.length ? n % 5 : 0;
        const split = start + Math.floor((bytes.length - start) / 3);
        const whole = crc32cBitwise(bytes.subarray(start));
        expect(crc(bytes, 0, start)).toBe(whole);
        expect(crc(bytes, crc(bytes, 0, start, split), split)).toBe(whole);
      }
    }
  });
});

describe.each(["pool", "thread"] as const)("the log's %s syncer", (kind) => {
  it("resolves calls in call order; calls made during an fdatasync share the next; a failed one rejects its calls with the system error and the next works", async () => {
    const syncer = await startSyncer(kind);
    const dir = tempFolder();
    const fd = fs.openSync(path.join(dir, "file"), "w");
    try {
      const order: number[] = [];
      const calls = Array.from({ length: 200 }, (_, n) => {
        fs.writeSync(fd, payloadOf(n));
        return syncer.sync(fd).then(() => void order.push(n));
      });
      await Promise.all(calls);
      expect(order).toEqual(calls.map((_, n) => n));
      // A descriptor that is not open: EBADF, with its code, to the calls it served; then the syncer goes on.
      const closed = fs.openSync(path.join(dir, "closed"), "w");
      fs.closeSync(closed);
      await expect(syncer.sync(closed)).rejects.toMatchObject({ code: "EBADF" });
      await expect(syncer.sync(fd)).resolves.toBeUndefined();
    } finally {
      fs.closeSync(fd);
      await syncer.close();
    }
  });
});

describe("WriteAheadLog", () => {
  it.each(["pool", "thread"] as const)("makes concurrent appends (whole or in parts) durable in call order: after close and reopen each is read back at its position (%s syncer)", async (syncer) => {
    const dir = path.join(tempFolder(), "wal");
    const log = await openLog(dir, { segmentMaxBytes: 64 * 1024, syncer });
    const called: number[] = [];
    const resolved: number[] = [];
    const positions = new Map<number, WalPosition>();
    let next = 0;
    const client = async () => {
      while (next < 3000) {
        const n = next++;
        called.push(n);
        // Every third record is given in two parts (as the collector gives a header and a body): one record all the same.
        const payload = payloadOf(n);
        const cut = payload.length === 0 ? 0 : n % payload.length;
        const position = await log.append(n % 3 === 0 ? [payload.subarray(0, cut), payload.subarray(cut)] : payload);
        resolved.push(n);
        positions.set(n, position);
        if (n % 7 === 0) await new Promise((resolve) => setImmediate(resolve));
      }
    };
    await Promise.all(Array.from({ length: 12 }, client));
    expect(resolved).toEqual(called);
    expect(log.sealed().length).toBeGreaterThan(10);
    await closeLog(log);

    const reopened = await openLog(dir, { segmentMaxBytes: 64 * 1024 });
    expect(reopened.recovery).toEqual({ truncated: [], corrupt: [] });
    const { records, corrupt } = await readAll(reopened);
    expect(corrupt).toEqual([]);
    expect(records.map((record) => ({ segment: record.segment, offset: record.offset }))).toEqual(called.map((n) => positions.get(n)));
    records.forEach((record, i) => expect(record.payload.equals(payloadOf(called[i] as number))).toBe(true));
    expect(reopened.bytes).toBe(diskBytes(dir));
  });

  it("answers an append only after an fdatasync that started after its write, and the appends written during one fsync share the next", async () => {
    const dir = tempFolder();
    const log = await openLog(dir);
    const realFdatasync = fs.fdatasync;
    const realWritevSync = fs.writevSync;
    let durableEnd = 0;
    let writes = 0;
    let syncs = 0;
    let gate: Promise<void> | undefined = undefined;
    vi.spyOn(fs, "writevSync").mockImplementation((...args: Parameters<typeof fs.writevSync>) => {
      writes += 1;
      return realWritevSync(...args);
    });
    vi.spyOn(fs, "fdatasync").mockImplementation(((fd: number, done: (error: NodeJS.ErrnoException | null) => void) => {
      syncs += 1;
      const size = fs.fstatSync(fd).size;
      const sync = () =>
        realFdatasync(fd, (error) => {
          if (!error) durableEnd = Math.max(durableEnd, size);
          done(error);
        });
      if (gate) void gate.then(sync);
      else setTimeout(sync, 5 + Math.random() * 20);
    }) as typeof fs.fdatasync);

    // Appends that arrive one by one (each in its own event-loop turn, at random times), as requests do.
    const appends: Promise<void>[] = [];
    for (let n = 0; n < 300; n += 1) {
      if (Math.random() < 0.3) await new Promise((resolve) => setTimeout(resolve, Math.random() * 3));
      else await new Promise((resolve) => setImmediate(resolve));
      const payload = payloadOf(n);
      appends.push(log.append(payload).then((position) => expect(position.offset + 8 + payload.length).toBeLessThanOrEqual(durableEnd)));
    }
    await Promise.all(appends);
    // Each append is written as it comes (in its own turn, so its own write); the fsyncs are shared.
    expect(writes).toBe(300);
    expect(syncs).toBeLessThan(300 / 3);

    // The first append of a burst is written and synced at once; all written while that fsync runs share the next.
    let release = () => {};
    gate = new Promise<void>((resolve) => (release = resolve));
    const [before, beforeWrites] = [syncs, writes];
    const burst = [log.append(payloadOf(1000))];
    while (syncs === before) await new Promise((resolve) => setImmediate(resolve));
    for (let n = 1; n < 50; n += 1) {
      await new Promise((resolve) => setImmediate(resolve));
      burst.push(log.append(payloadOf(1000 + n)));
    }
    await new Promise((resolve) => setImmediate(resolve));
    expect(syncs - before).toBe(1);
    // Written while the fsync runs, not after it: the next fsync has nothing to wait for.
    expect(writes - beforeWrites).toBe(50);
    release();
    await Promise.all(burst);
    expect(syncs - before).toBe(2);
    expect(writes - beforeWrites).toBe(50);

    // A round of more buffers than one writev(2) takes (IOV_MAX = 1024) is still one write call and one fsync.
    gate = undefined;
    const [large, largeWrites] = [syncs, writes];
    const many = await Promise.all(Array.from({ length: 3000 }, (_, n) => log.append(payloadOf(n, n % 50))));
    expect([syncs - large, writes - largeWrites]).toEqual([1, 1]);
    const segment = (await log.seal()) as string;
    const { records } = await log.read(segment);
    expect(records.slice(-3000)).toEqual(many.map((position, n) => ({ ...position, payload: payloadOf(n, n % 50) })));
  });

  it("fails closed after a failed fdatasync: every append of that round and every later call is refused with the cause", async () => {
    const dir = tempFolder();
    const log = await openLog(dir);
    const first = await log.append(payloadOf(1));
    const realFdatasync = fs.fdatasync;
    vi.spyOn(fs, "fdatasync").mockImplementationOnce(((_fd: number, done: (error: NodeJS.ErrnoException | null) => void) => {
      done(Object.assign(new Error("EIO: i/o error, fdatasync"), { code: "EIO" }));
    }) as typeof fs.fdatasync);
    const round = await Promise.allSettled(Array.from({ length: 20 }, (_, n) => log.append(payloadOf(2 + n))));
    expect(round.every((result) => result.status === "rejected")).toBe(true);
    const reason = (round[0] as PromiseRejectedResult).reason as { code: string; message: string };
    expect(reason.code).toBe("STORE_ERROR");
    expect(reason.message).toContain(`the write-ahead log in '${dir}' stopped after an error syncing segment`);
    expect(reason.message).toContain("EIO");
    expect(new Set(round.map((result) => (result as PromiseRejectedResult).reason)).size).toBe(1);
    vi.mocked(fs.fdatasync).mockImplementation(realFdatasync);
    await expect(log.append(payloadOf(99))).rejects.toBe(reason);
    await expect(log.seal()).rejects.toBe(reason);
    await expect(log.rotateIfDue(Date.now() + 3_600_000)).rejects.toBe(reason);
    await closeLog(log);

    const reopened = await openLog(dir);
    const { records } = await readAll(reopened);
    expect(records[0]).toEqual({ ...first, payload: payloadOf(1) });
  });

  it("refuses what was written while a failed fdatasync ran, even when the next one succeeds: no later fsync proves anything", async () => {
    const log = await openLog(tempFolder());
    // The first fails once released (the kernel dropped pages it could not write); the next would succeed.
    const held = holdFdatasyncs((n) => n === 1);
    const first = log.append(payloadOf(1));
    await held.started();
    // Written while the failing fsync runs: their own fsync comes after it.
    const later: Promise<WalPosition>[] = [];
    for (let n = 2; n < 12; n += 1) {
      await new Promise((resolve) => setImmediate(resolve));
      later.push(log.append(payloadOf(n)));
    }
    held.release();
    const results = await Promise.allSettled([first, ...later]);
    expect(results.map((result) => result.status)).toEqual(results.map(() => "rejected"));
    const reasons = new Set(results.map((result) => (result as PromiseRejectedResult).reason as Error));
    expect(reasons.size).toBe(1);
    expect([...reasons][0]!.message).toContain("EIO");
  });

  it("acknowledges an append whose fdatasync succeeds even when a write after it fails (full disk: NO_SPACE, later appends refused)", async () => {
    const dir = tempFolder();
    const log = await openLog(dir);
    const held = holdFdatasyncs();
    const first = log.append(payloadOf(1));
    await held.started();
    // The next write, while the first append's fsync runs, finds the disk full.
    vi.spyOn(fs, "writevSync").mockImplementationOnce(() => {
      throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
    });
    const failed = log.append(payloadOf(2));
    await expect(failed).rejects.toMatchObject({ code: "NO_SPACE", message: expect.stringContaining("free space in that folder") });
    held.release();
    const position = await first;
    await expect(log.append(payloadOf(3))).rejects.toMatchObject({ code: "NO_SPACE" });
    await closeLog(log);

    const reopened = await openLog(dir);
    expect((await readAll(reopened)).records).toEqual([{ ...position, payload: payloadOf(1) }]);
  });

  it("refuses a payload over 64 MiB with a clear error and stays usable", async () => {
    const log = await openLog(tempFolder());
    await expect(log.append(Buffer.alloc(WAL_MAX_PAYLOAD_BYTES + 1))).rejects.toMatchObject({
      code: "INVALID_INPUT",
      message: expect.stringContaining(`holds at most ${WAL_MAX_PAYLOAD_BYTES} bytes (64 MiB), this one has ${WAL_MAX_PAYLOAD_BYTES + 1}`),
    });
    const empty = await log.append(Buffer.alloc(0));
    const segment = await log.seal();
    expect((await log.read(segment as string)).records).toEqual([{ ...empty, payload: Buffer.alloc(0) }]);
  });

  it("seals a segment as soon as it reaches segmentMaxBytes; ids are the log's id and a zero-padded sequence", async () => {
    const dir = tempFolder();
    const log = await openLog(dir, { segmentMaxBytes: 4096 });
    const sizes: number[] = [];
    for (let n = 0; n < 200; n += 1) {
      const payload = payloadOf(n, (n * 37) % 1000);
      sizes.push(8 + payload.length);
      await log.append(payload);
    }
    const sealed = log.sealed();
    expect(sealed.length).toBeGreaterThan(10);
    expect([...sealed].sort()).toEqual(sealed);
    let record = 0;
    for (const [i, segment] of sealed.entries()) {
      expect(segment).toBe(`${log.id}-${String(i + 1).padStart(12, "0")}`);
      const { records } = await log.read(segment);
      const size = records.reduce((sum, r) => sum + 8 + r.payload.length, 0);
      expect(size).toBeGreaterThanOrEqual(4096);
      expect(size - (sizes[record + records.length - 1] as number)).toBeLessThan(4096);
      record += records.length;
    }
    expect(log.bytes).toBe(diskBytes(dir));
  });

  it("seals by age only when rotateIfDue finds the first record old enough, and never an empty segment", async () => {
    const dir = tempFolder();
    const log = await openLog(dir, { segmentMaxAgeMs: 5_000 });
    expect(await log.rotateIfDue(Date.now() + 3_600_000)).toBeUndefined();
    const start = Date.now();
    const position = await log.append(payloadOf(1));
    await log.append(payloadOf(2));
    expect(await log.rotateIfDue(start + 4_000)).toBeUndefined();
    const fsyncs = recordFsyncs();
    expect(await log.rotateIfDue(Date.now() + 5_000)).toBe(position.segment);
    expect(fsyncs.count(dir)).toBe(1);
    fsyncs.restore();
    expect(log.sealed()).toEqual([position.segment]);
    expect(await log.rotateIfDue(Date.now() + 3_600_000)).toBeUndefined();
    expect(await log.seal()).toBeUndefined();
    const later = await log.append(payloadOf(3));
    expect(later.segment > position.segment).toBe(true);
    expect((await log.read(position.segment)).records.map((r) => r.payload)).toEqual([payloadOf(1), payloadOf(2)]);
    await expect(log.read(later.segment)).rejects.toThrow(`segment '${later.segment}' of the write-ahead log in`);
  });

  it("cuts a torn last record at every byte offset, keeps every earlier record and reports the cut", async () => {
    const template = tempFolder();
    const log = await openLog(template);
    const payloads = [payloadOf(1, 300), payloadOf(2, 0), payloadOf(3, 41), payloadOf(4, 57)];
    const positions: WalPosition[] = [];
    for (const payload of payloads) positions.push(await log.append(payload));
    await closeLog(log);
    const [file] = segmentFiles(template);
    const bytes = fs.readFileSync(path.join(template, file as string));
    const last = positions[3] as WalPosition;
    expect(bytes.length).toBe(last.offset + 8 + 57);

    const cuts = Array.from({ length: bytes.length - last.offset - 1 }, (_, i) => last.offset + 1 + i);
    for (const end of [...cuts, -4096]) {
      const dir = tempFolder();
      fs.copyFileSync(path.join(template, "id"), path.join(dir, "id"));
      const torn = end > 0 ? bytes.subarray(0, end) : Buffer.concat([bytes.subarray(0, last.offset), Buffer.alloc(-end)]);
      fs.writeFileSync(path.join(dir, file as string), torn);
      const fsyncs = recordFsyncs();
      const recovered = await openLog(dir);
      expect(fsyncs.paths.indexOf(path.join(dir, file as string))).toBeGreaterThanOrEqual(0);
      expect(fsyncs.paths.indexOf(path.join(dir, file as string))).toBeLessThan(fsyncs.paths.lastIndexOf(dir));
      fsyncs.restore();
      expect(recovered.recovery).toEqual({ truncated: [{ segment: last.segment, offset: last.offset, bytes: torn.length - last.offset }], corrupt: [] });
      expect(recovered.sealed()).toEqual([last.segment]);
      expect(fs.statSync(path.join(dir, (file as string).replace(".open", ".sealed"))).size).toBe(last.offset);
      const { records, corrupt } = await recovered.read(last.segment);
      expect(corrupt).toEqual([]);
      expect(records).toEqual(payloads.slice(0, 3).map((payload, i) => ({ ...positions[i], payload })));
      const after = await recovered.append(payloadOf(5));
      expect(after.segment > last.segment).toBe(true);
      await closeLog(recovered);
    }
  });

  /** Five records in one segment, the middle one damaged by `damage`, checked both when open() recovers it and when read() reads it sealed. */
  async function expectMiddleSkipped(damage: (bytes: Buffer, middle: WalPosition) => void, reason: RegExp): Promise<void> {
    const template = tempFolder();
    const log = await openLog(template);
    const payloads = [40, 300, 64, 7, 120].map((size, n) => payloadOf(n, size));
    const positions: WalPosition[] = [];
    for (const payload of payloads) positions.push(await log.append(payload));
    await closeLog(log);
    const [file] = segmentFiles(template);
    const original = fs.readFileSync(path.join(template, file as string));
    const middle = positions[2] as WalPosition;
    const expected = {
      records: [0, 1, 3, 4].map((i) => ({ ...positions[i], payload: payloads[i] })),
      corrupt: [{ segment: middle.segment, offset: middle.offset, bytes: 8 + 64, reason: expect.stringMatching(reason) }],
    };
    for (const state of ["open", "sealed"]) {
      const dir = tempFolder();
      fs.copyFileSync(path.join(template, "id"), path.join(dir, "id"));
      const bytes = Buffer.from(original);
      damage(bytes, middle);
      fs.writeFileSync(path.join(dir, (file as string).replace(".open", `.${state}`)), bytes);
      const recovered = await openLog(dir);
      expect(recovered.recovery).toEqual(state === "open" ? { truncated: [], corrupt: expected.corrupt } : { truncated: [], corrupt: [] });
      expect(await recovered.read(middle.segment)).toEqual(expected);
      await closeLog(recovered);
    }
  }

  it("skips a record with a corrupt payload or checksum byte, reports its offset, and recovers every record after it", async () => {
    // Every byte of the checksum field, the payload's first and last bytes, and 14 more anywhere in it.
    const positions = [4, 5, 6, 7, 8, 8 + 63, ...Array.from({ length: 14 }, () => 9 + Math.floor(Math.random() * 62))];
    for (const at of positions) {
      await expectMiddleSkipped((bytes, middle) => {
        bytes[middle.offset + at] = (bytes[middle.offset + at] as number) ^ (1 + (at % 255));
      }, /checksum mismatch/);
    }
  });

  it("resynchronizes after a corrupt length field: the skipped bytes are one corruption, every later record is recovered", async () => {
    const lengths = [0, 1, 63, 65, 72, 73, 200, 1000, 0xffff, 0x00ffffff, 0xffffffff, ...Array.from({ length: 20 }, () => Math.floor(Math.random() * 2 ** 32))];
    for (const length of lengths.filter((value) => value !== 64)) {
      await expectMiddleSkipped((bytes, middle) => bytes.writeUInt32LE(length, middle.offset), /checksum mismatch|over the|runs past the end/);
    }
  });

  it("writes appends of tens of MiB whole and in order, in one round or alone", async () => {
    const dir = tempFolder();
    const log = await openLog(dir, { segmentMaxBytes: 1 << 30, syncer: "thread" });
    const big = (n: number, size: number) => Buffer.concat([payloadOf(n, 1499), Buffer.alloc(size, n), payloadOf(n + 1, 1500)]);
    // One round of three appends (about 21 MiB), then one append of 20 MiB alone.
    const payloads = [big(1, 5 << 20), big(2, 9 << 20), big(3, 7 << 20), big(4, 20 << 20)];
    const positions = [...(await Promise.all(payloads.slice(0, 3).map((p) => log.append(p)))), await log.append(payloads[3]!)];
    const segment = (await log.seal()) as string;
    const { records, corrupt } = await log.read(segment);
    expect(corrupt).toEqual([]);
    expect(records.map((r) => r.offset)).toEqual(positions.map((p) => p.offset));
    records.forEach((record, i) => expect(record.payload.equals(payloads[i]!)).toBe(true));
  });

  it("keeps the process alive while the sync thread has an fdatasync to answer, and lets it exit once idle", async () => {
    // A script whose only pending work is an append: it must get its answer (not exit 13, an unsettled await), then end.
    const dir = path.join(tempFolder(), "wal");
    const script = path.join(tempFolder(), "append-once.mts");
    fs.writeFileSync(
      script,
      `import { WriteAheadLog } from ${JSON.stringify(WAL_MODULE)};\n` +
        `const log = await WriteAheadLog.open({ dir: process.argv[2], segmentMaxBytes: 1 << 20, segmentMaxAgeMs: 60_000, maxBytes: 1 << 30, syncer: "thread" });\n` +
        `process.stdout.write(JSON.stringify(await log.append(Buffer.from("hello"))));\n`,
    );
    const child = spawn(process.execPath, ["--import", "tsx", script, dir], { cwd: REPO_ROOT, env: { ...process.env, NODE_NO_WARNINGS: "1" }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (err += chunk.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    clearTimeout(timer);
    expect({ code, err }).toEqual({ code: 0, err: "" });
    const position = JSON.parse(out) as WalPosition;
    const log = await openLog(dir);
    expect((await readAll(log)).records).toEqual([{ ...position, payload: Buffer.from("hello") }]);
  });

  it.runIf(process.platform === "linux")("fails closed when a write fails: the round and every later call are refused with the cause", async () => {
    const dir = tempFolder();
    const log = await openLog(dir, { syncer: "thread" });
    const first = await log.append(payloadOf(1));
    // The active segment's descriptor, closed behind the log's back: the next write gets EBADF.
    const active = path.join(dir, segmentFiles(dir).find((name) => name.endsWith(".open"))!);
    const fd = fs.readdirSync("/proc/self/fd").map(Number).find((n) => {
      try {
        return fs.readlinkSync(`/proc/self/fd/${n}`) === active;
      } catch {
        return false;
      }
    });
    expect(fd).toBeDefined();
    fs.closeSync(fd!);
    const round = await Promise.allSettled(Array.from({ length: 10 }, (_, n) => log.append(payloadOf(2 + n))));
    expect(round.every((result) => result.status === "rejected")).toBe(true);
    const reason = (round[0] as PromiseRejectedResult).reason as { code: string; message: string };
    expect(reason.code).toBe("STORE_ERROR");
    expect(reason.message).toContain(`the write-ahead log in '${dir}' stopped after an error writing`);
    expect(reason.message).toContain("EBADF");
    await expect(log.append(payloadOf(99))).rejects.toBe(reason);
    await expect(log.seal()).rejects.toBe(reason);
    await closeLog(log);

    const reopened = await openLog(dir);
    const { records } = await readAll(reopened);
    expect(records.map((r) => ({ segment: r.segment, offset: r.offset, payload: r.payload }))).toEqual([{ ...first, payload: payloadOf(1) }]);
  });

  it("lends its read buffer to one reader at a time: a smaller segment after a larger one, and overlapping readers, each see their own records", async () => {
    const dir = tempFolder();
    const log = await openLog(dir, { segmentMaxBytes: 1 << 30 });
    const segments: { id: string; payloads: Buffer[] }[] = [];
    // Sizes that shrink, grow past the buffer, and shrink again; payloads differ between segments.
    for (const [first, count] of [[0, 40], [100, 3], [200, 90], [300, 1], [400, 0]] as const) {
      const payloads = Array.from({ length: count }, (_, i) => payloadOf(first + i));
      await Promise.all(payloads.map((payload) => log.append(payload)));
      const id = count > 0 ? await log.seal() : undefined;
      if (id !== undefined) segments.push({ id, payloads });
    }
    for (const { id, payloads } of segments) {
      const seen = await log.withSegment(id, async ({ records, corrupt }) => {
        expect(corrupt).toEqual([]);
        return records.map((r) => Buffer.from(r.payload));
      });
      expect(seen).toEqual(payloads);
      expect(seen).toEqual((await log.read(id)).records.map((r) => r.payload));
    }
    // A reader inside another: the inner one gets a buffer of its own, and the outer one's records stay intact.
    const [outer, inner] = [segments[2]!, segments[0]!];
    await log.withSegment(outer.id, async (outerContents) => {
      await log.withSegment(inner.id, async ({ records }) => expect(records.map((r) => r.payload)).toEqual(inner.payloads));
      expect(outerContents.records.map((r) => r.payload)).toEqual(outer.payloads);
    });
    // The buffer is free again after a reader that threw.
    await expect(log.withSegment(inner.id, () => Promise.reject(new Error("landing failed")))).rejects.toThrow("landing failed");
    await log.withSegment(segments[1]!.id, async ({ records }) => expect(records.map((r) => r.payload)).toEqual(segments[1]!.payloads));
    await expect(log.withSegment("nope-000000000001", async () => undefined)).rejects.toMatchObject({ code: "NOT_FOUND" });
  });

  it("removes a sealed segment durably; a removed segment's id is never used again, even after a restart", async () => {
    const dir = tempFolder();
    let log = await openLog(dir);
    const sealed: string[] = [];
    for (let n = 0; n < 3; n += 1) {
      await log.append(payloadOf(n, 500));
      sealed.push((await log.seal()) as string);
    }
    const bytes = log.bytes;
    const fsyncs = recordFsyncs();
    await log.remove(sealed[1] as string);
    expect(fsyncs.count(dir)).toBe(1);
    fsyncs.restore();
    expect(log.sealed()).toEqual([sealed[0], sealed[2]]);
    expect(log.bytes).toBe(bytes - 508);
    expect(diskBytes(dir)).toBe(log.bytes);
    await expect(log.read(sealed[1] as string)).rejects.toMatchObject({ code: "NOT_FOUND", message: expect.stringContaining("is not a sealed segment") });
    await expect(log.remove("nope")).rejects.toMatchObject({ code: "NOT_FOUND" });
    const active = await log.append(payloadOf(9));
    await expect(log.remove(active.segment)).rejects.toThrow("is the active segment: seal() it first");

    await closeLog(log);
    log = await openLog(dir);
    expect(log.sealed()).toEqual([sealed[0], sealed[2], active.segment]);
    for (const segment of log.sealed()) await log.remove(segment);
    expect(log.bytes).toBe(0);
    await closeLog(log);
    log = await openLog(dir);
    const next = await log.append(payloadOf(10));
    expect(next.segment > active.segment).toBe(true);
    expect(log.overLimit).toBe(false);
  });

  it("keeps a crashed seal's next segment: an open segment with records is sealed, the empty newer one becomes the active one", async () => {
    const dir = tempFolder();
    const log = await openLog(dir);
    const first = await log.append(payloadOf(1));
    await closeLog(log);
    const [file] = segmentFiles(dir);
    const nextFile = (file as string).replace(/^\d+/, (seq) => String(Number(seq) + 1).padStart(12, "0"));
    fs.writeFileSync(path.join(dir, nextFile), "");
    const recovered = await openLog(dir);
    expect(recovered.sealed()).toEqual([first.segment]);
    const next = await recovered.append(payloadOf(2));
    expect(next.segment).toBe(`${recovered.id}-${nextFile.replace(".open", "")}`);
    expect(segmentFiles(dir)).toEqual([(file as string).replace(".open", ".sealed"), nextFile]);
  });

  it("is over its limit exactly while its segments hold maxBytes or more, counted in memory and again on open", async () => {
    const dir = tempFolder();
    const log = await openLog(dir, { maxBytes: 10_000, segmentMaxBytes: 3_000 });
    while (!log.overLimit) {
      expect(log.bytes).toBeLessThan(10_000);
      await log.append(payloadOf(1, 992));
      expect(log.bytes).toBe(diskBytes(dir));
    }
    expect(log.bytes).toBe(10_000);
    await closeLog(log);
    const reopened = await openLog(dir, { maxBytes: 10_000, segmentMaxBytes: 3_000 });
    expect([reopened.bytes, reopened.overLimit]).toEqual([10_000, true]);
    await reopened.remove(reopened.sealed()[0] as string);
    expect([reopened.bytes, reopened.overLimit]).toEqual([diskBytes(dir), false]);
  });

  it("keeps its id in the folder; another folder gets another id", async () => {
    const dir = tempFolder();
    const log = await openLog(dir);
    expect(log.id).toMatch(/^[0-9a-f]{24}$/);
    await closeLog(log);
    expect((await openLog(dir)).id).toBe(log.id);
    expect((await openLog(tempFolder())).id).not.toBe(log.id);
    const lost = tempFolder();
    fs.writeFileSync(path.join(lost, "000000000003.sealed"), frame(payloadOf(1)));
    await expect(openLog(lost)).rejects.toThrow(`the write-ahead log in '${lost}' has segments but no 'id' file`);
    expect(fs.existsSync(path.join(lost, "lock"))).toBe(false);
  });

  it("is owned by one process: a live holder's lock is refused naming the folder and pid, a dead holder's taken over", async () => {
    const dir = tempFolder();
    const log = await openLog(dir);
    expect(fs.readFileSync(path.join(dir, "lock"), "utf8")).toBe(`${process.pid}\n`);
    await expect(openLog(dir)).rejects.toMatchObject({
      code: "LEASE_HELD",
      message: `the write-ahead log in '${dir}' is in use by process ${process.pid} (this process): stop it, or give this collector its own WAL folder`,
    });
    await closeLog(log);
    expect(fs.existsSync(path.join(dir, "lock"))).toBe(false);

    const sleeper = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60000)"], { stdio: "ignore" });
    const exited = new Promise((resolve) => sleeper.on("exit", resolve));
    try {
      fs.writeFileSync(path.join(dir, "lock"), `${sleeper.pid}\n`);
      await expect(openLog(dir)).rejects.toThrow(`the write-ahead log in '${dir}' is in use by process ${sleeper.pid}: stop it`);
    } finally {
      sleeper.kill("SIGKILL");
      await exited;
    }
    const reopened = await openLog(dir);
    expect(fs.readFileSync(path.join(dir, "lock"), "utf8")).toBe(`${process.pid}\n`);
    await closeLog(reopened);

    fs.writeFileSync(path.join(dir, "lock"), "garbage");
    await expect(openLog(dir)).rejects.toThrow(`the lock file '${path.join(dir, "lock")}' holds 'garbage', not a process id`);
  });

  it("keeps every acknowledged record intact when the writer is killed with SIGKILL at random moments", async () => {
    const dir = path.join(tempFolder(), "wal");
    const writer = path.join(tempFolder(), "wal-writer.mts");
    fs.writeFileSync(writer, writerScript());
    const acknowledged = new Map<number, WalPosition>();
    const removed = new Set<string>();
    const seen = new Set<string>();
    for (let round = 0; round < 10; round += 1) {
      // The first half of the rounds with the log's sync thread, the second half on libuv's pool.
      const child = spawn(process.execPath, ["--import", "tsx", writer, dir, String(round * 1_000_000), round < 5 ? "thread" : "pool"], {
        cwd: REPO_ROOT,
        env: { ...process.env, NODE_NO_WARNINGS: "1" },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      let err = "";
      let killed = false;
      // Even rounds: after a random number of acknowledged records; odd ones: at a random time from the start,
      // which may fall while the writer opens the log and recovers what the previous round left.
      const killAt = round % 2 === 0 ? 200 + Math.floor(Math.random() * 800) : Infinity;
      const killTimer = setTimeout(() => child.kill("SIGKILL"), round % 2 === 0 ? 20_000 : 300 + Math.random() * 900);
      const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on("close", (_code, signal) => resolve(signal)));
      child.stderr.on("data", (chunk: Buffer) => (err += chunk.toString()));
      child.stdout.on("data", (chunk: Buffer) => {
        out += chunk.toString();
        if (!killed && out.split("\n").length > killAt) {
          killed = true;
          child.kill("SIGKILL");
        }
      });
      const signal = await exited;
      clearTimeout(killTimer);
      expect(signal, err).toBe("SIGKILL");
      for (const line of out.split("\n").filter((text) => text.length > 0)) {
        const { n, segment, offset } = JSON.parse(line) as { n: number } & WalPosition;
        acknowledged.set(n, { segment, offset });
      }

      const log = await openLog(dir);
      expect(log.recovery.corrupt).toEqual([]);
      const { records, corrupt } = await readAll(log);
      expect(corrupt).toEqual([]);
      const stored = new Map(records.map((record) => [`${record.segment}@${record.offset}`, record.payload]));
      for (const [n, position] of acknowledged) {
        if (removed.has(position.segment)) continue;
        expect(stored.get(`${position.segment}@${position.offset}`)?.equals(writerPayload(n)), `record ${n} at ${position.segment}@${position.offset}`).toBe(true);
      }
      for (const segment of log.sealed()) {
        expect(removed.has(segment)).toBe(false);
        seen.add(segment);
      }
      // The uploader's part: the older half of the sealed segments is done with.
      for (const segment of log.sealed().slice(0, Math.floor(log.sealed().length / 2))) {
        await log.remove(segment);
        removed.add(segment);
      }
      await closeLog(log);
    }
    expect(acknowledged.size).toBeGreaterThan(500);
    expect(seen.size).toBeGreaterThan(10);
  });
});

/** The payload of record `n` of the kill test's writer (its source is copied into the writer script). */
function writerPayload(n: number): Buffer {
  return Buffer.from(JSON.stringify({ n, filler: "x".repeat((n * 7919) % 3000) }));
}

/** A child that appends from 8 concurrent loops, rotating by size and age, and prints each position once its append resolves. */
function writerScript(): string {
  return `
import { WriteAheadLog } from ${JSON.stringify(WAL_MODULE)};
const writerPayload = ${writerPayload.toString()};
const [dir, first, syncer] = process.argv.slice(2);
const log = await WriteAheadLog.open({ dir, segmentMaxBytes: 64 * 1024, segmentMaxAgeMs: 30, maxBytes: 2 ** 40, syncer });
setInterval(() => void log.rotateIfDue().catch(() => undefined), 10);
let next = Number(first);
const loop = async () => {
  for (;;) {
    const n = next++;
    const position = await log.append(writerPayload(n));
    process.stdout.write(JSON.stringify({ n, ...position }) + "\\n");
  }
};
await Promise.all(Array.from({ length: 8 }, loop));
`;
}
