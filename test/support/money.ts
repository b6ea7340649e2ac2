/**
 * Money a test puts in and takes out of a project's tank through the ledger's own functions, as
 * the watchers do: a deposit recorded with its block and credited, a reservation, and a settled
 * operation (backdated when a test needs spend on an earlier day). Shared by the API and browser
 * tests of the money view and the deposit history.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import type { Db } from "../../src/db/db.ts";
import { recordChainDeposit } from "../../src/funding/store.ts";
import { billOperation, creditDeposit, type Reservation, reserve } from "../../src/ledger/ledger.ts";

export const MONEY_TARGET = "0x5fbdb2315678afecb367f032d93f642f64180aa3";
export const MONEY_SELECTOR = "0xa0712d68";
const PAYMASTER = "0x00000000000000000000000000000000000000aa";
const DAY_MS = 86_400_000;

export const randomHash = () => `0x${randomBytes(32).toString("hex")}`;

/** Credits a transfer the way the deposit watcher does: recorded with its block, then credited. */
export async function watchedDeposit(
  db: Db,
  p: { projectId: string; depositAddress: string },
  amountWei: bigint,
  blockNumber: bigint,
) {
  const txHash = randomHash();
  const blockHash = randomHash();
  await db.transaction(async (tx) => {
    const recorded = await recordChainDeposit(tx, {
      chainId: 14601,
      txHash,
      position: "0",
      blockNumber,
      blockHash,
      projectId: p.projectId,
      address: p.depositAddress,
      amountWei,
    });
    assert.equal(recorded.kind, "new");
    if (recorded.kind !== "new") return;
    await creditDeposit(db, { projectId: p.projectId, reference: recorded.reference, amountWei }, tx);
  });
  return { txHash, blockHash };
}

/**
 * A new authorization of the allowlisted mint for `maxGasCostWei`, as the reservation takes it: a
 * fresh id, from `sender` (a fresh random one by default), valid from a minute ago for an hour.
 */
export function mintReservation(
  projectId: string,
  maxGasCostWei: bigint,
  sender = `0x${randomBytes(20).toString("hex")}`,
): Reservation {
  return {
    projectId,
    clientNonce: null,
    requestDigest: null,
    authId: randomHash(),
    apiKeyId: null,
    chainId: 14601,
    sender,
    target: MONEY_TARGET,
    selector: MONEY_SELECTOR,
    estimatedGas: 100_000n,
    maxGasCostWei,
    maxFeePerGasWei: 2_000_000_000n,
    maxPriorityFeePerGasWei: 1_000_000_000n,
    paymaster: PAYMASTER,
    validAfterSec: Math.floor(Date.now() / 1000) - 60,
    validUntilSec: Math.floor(Date.now() / 1000) + 3600,
    response: null,
    requestedAtMs: Date.now(),
  };
}

/** Reserves `maxGasCostWei` for a new authorization of the allowlisted mint; returns its id. */
export async function reserveMint(db: Db, projectId: string, maxGasCostWei: bigint): Promise<string> {
  const r = mintReservation(projectId, maxGasCostWei);
  const outcome = await reserve(db, r);
  assert.equal(outcome.kind, "reserved", JSON.stringify(outcome));
  return r.authId;
}

/** Reserves and settles an operation that cost `costWei`, counted `daysAgo` UTC days back. */
export async function spend(db: Db, projectId: string, costWei: bigint, daysAgo = 0): Promise<void> {
  const authId = await reserveMint(db, projectId, costWei);
  await db.transaction((tx) =>
    billOperation(tx, {
      authId,
      chainId: 14601,
      paymaster: PAYMASTER,
      outcome: "success",
      actualGasUsed: 21_000n,
      actualGasCostWei: costWei,
      txHash: randomHash(),
      userOpHash: randomHash(),
    }),
  );
  if (daysAgo > 0) {
    await db.query(
      `UPDATE sponsorships SET settled_at = settled_at - $2::int * interval '1 day' WHERE auth_id = decode(substr($1, 3), 'hex')`,
      [authId, daysAgo],
    );
  }
}

export const utcDayAgo = (daysAgo: number, nowMs = Date.now()) =>
  new Date(nowMs - daysAgo * DAY_MS).toISOString().slice(0, 10);
