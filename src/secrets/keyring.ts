import { randomBytes } from "node:crypto";
import type { Config } from "../config.ts";
import { decodeKey, KEY_BYTES, type Keyring, keyring } from "./envelope.ts";
import { loadOrCreateSecret, peekSecret } from "./key-files.ts";

/** The key file of the embedded default, in DATA_DIR beside the signer key. */
export const SECRETS_KEY_FILE = "secrets.key";

type KeyringConfig = Pick<Config, "dataDir" | "secretsEncryptionKey" | "secretsEncryptionKeysPrevious">;

/**
 * The keys that seal stored secrets. SECRETS_ENCRYPTION_KEY seals (production refuses to start
 * without it, src/process/policy.ts); SECRETS_ENCRYPTION_KEYS_PREVIOUS only open. Without a
 * configured key (development, or ALLOW_INSECURE_DEFAULTS) one is generated once into
 * DATA_DIR/secrets.key, so that `npm start` needs nothing set. When a key is configured and such
 * a file exists, its key still opens what it sealed: a development install that moves to a
 * configured key keeps its webhooks, and `npm run secrets -- rotate` re-seals them.
 */
export function secretsKeyring(config: KeyringConfig): Keyring {
  const previous = [...config.secretsEncryptionKeysPrevious];
  if (config.secretsEncryptionKey) {
    const file = peekSecret(config.dataDir, SECRETS_KEY_FILE);
    if (file !== null) previous.push(keyFromFile(file));
    return keyring(config.secretsEncryptionKey, previous);
  }
  const generated = loadOrCreateSecret(config.dataDir, SECRETS_KEY_FILE, () =>
    randomBytes(KEY_BYTES).toString("base64url"),
  );
  return keyring(keyFromFile(generated), previous);
}

function keyFromFile(text: string): Buffer {
  try {
    return decodeKey(text);
  } catch (err) {
    throw new Error(`DATA_DIR/${SECRETS_KEY_FILE} ${(err as Error).message}`);
  }
}
