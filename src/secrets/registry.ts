import { WEBHOOK_SEALED_COLUMNS } from "../webhooks/store.ts";
import type { SealedColumns } from "./reseal.ts";

/**
 * Every column that holds a sealed secret, from the modules that own the tables. Start-up seals
 * what is still plain text in them and `npm run secrets -- rotate` re-seals them all, so a module
 * that adds a sealed column adds it here.
 */
export const SEALED_COLUMNS: readonly SealedColumns[] = [...WEBHOOK_SEALED_COLUMNS];
