/**
 * `npm run secrets -- <command>`: the operator's tool for the secrets stored sealed (webhook and
 * approval signing secrets). It opens the store the server's configuration names, the same way
 * the server does (an embedded DATA_DIR is refused while a server holds it).
 *
 *   new-key   prints a fresh 32-byte key (base64) for SECRETS_ENCRYPTION_KEY
 *   status    how many stored secrets each key sealed, and whether any are plain text
 *   rotate    re-seals every stored secret under SECRETS_ENCRYPTION_KEY; once it reports none
 *             left under another key, the old key can leave SECRETS_ENCRYPTION_KEYS_PREVIOUS
 *
 * Exit status: 0 done, 1 the command failed (or secrets remain that no key opens), 2 the command
 * line or the configuration is wrong. Keys and secrets are never printed, only key ids.
 */
import { randomBytes } from "node:crypto";
import { type Config, ConfigError, loadConfig } from "../config.ts";
import { migrate } from "../db/migrate.ts";
import { processLogger } from "../process/log.ts";
import { openStore, StartupFailure } from "../process/startup.ts";
import { KEY_BYTES, type Keyring } from "./envelope.ts";
import { secretsKeyring } from "./keyring.ts";
import { SEALED_COLUMNS } from "./registry.ts";
import { resealSecrets, sealedSecretsStatus } from "./reseal.ts";

export interface Io {
  out(line: string): void;
  err(line: string): void;
}

const USAGE = "usage: npm run secrets -- <new-key | status | rotate>";

export async function runSecretsCli(
  argv: readonly string[],
  env: Record<string, string | undefined>,
  io: Io,
): Promise<number> {
  const [command, ...rest] = argv;
  if (rest.length > 0 || !["new-key", "status", "rotate"].includes(command ?? "")) {
    io.err(USAGE);
    return 2;
  }
  if (command === "new-key") {
    io.out(randomBytes(KEY_BYTES).toString("base64"));
    return 0;
  }
  let config: Config;
  try {
    config = loadConfig(env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    io.err(err.message);
    return 2;
  }
  if (config.env === "production" && !config.secretsEncryptionKey && !config.allowInsecureDefaults) {
    io.err("SECRETS_ENCRYPTION_KEY is not set: in production the key comes from configuration");
    return 2;
  }
  try {
    const store = await openStore(config, processLogger(config.logLevel));
    try {
      await migrate(store.db);
      const ring = secretsKeyring(config);
      if (command === "rotate") return await rotate(store.db, ring, io);
      await printStatus(store.db, ring, io);
      return 0;
    } finally {
      await store.close();
    }
  } catch (err) {
    if (!(err instanceof StartupFailure)) throw err;
    io.err(err.message);
    return err.exitCode;
  }
}

type Store = Awaited<ReturnType<typeof openStore>>["db"];

async function rotate(db: Store, ring: Keyring, io: Io): Promise<number> {
  const report = await resealSecrets(db, ring, SEALED_COLUMNS, "all");
  io.out(`re-encrypted ${report.resealed} secret(s) under key ${ring.current.id}`);
  for (const u of report.unreadable) {
    io.err(`cannot decrypt ${u.table} ${u.key} ${u.column}: ${u.reason}`);
  }
  const others = await printStatus(db, ring, io);
  if (report.unreadable.length > 0) return 1;
  io.out(
    others === 0
      ? "every stored secret is under the current key: keys in SECRETS_ENCRYPTION_KEYS_PREVIOUS are no longer needed"
      : `${others} secret(s) were written under another key meanwhile: run rotate again`,
  );
  return 0;
}

/** Prints the count per key; returns how many are not under the current key. */
async function printStatus(db: Store, ring: Keyring, io: Io): Promise<number> {
  const { plaintext, byKey } = await sealedSecretsStatus(db, SEALED_COLUMNS);
  const previous = new Set(ring.previous.map((k) => k.id));
  let others = plaintext;
  io.out(`current key ${ring.current.id}: ${byKey.get(ring.current.id) ?? 0} secret(s)`);
  for (const [id, n] of byKey) {
    if (id === ring.current.id) continue;
    others += n;
    io.out(`${previous.has(id) ? "previous" : "unknown"} key ${id}: ${n} secret(s)`);
  }
  if (plaintext > 0) io.out(`plain text: ${plaintext} secret(s) (the server encrypts them at start-up)`);
  return others;
}
