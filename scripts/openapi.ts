import { writeFileSync } from "node:fs";
import { buildApp } from "../src/app.ts";
import { loadConfig } from "../src/config.ts";
import { openPglite } from "../src/db/pglite.ts";
import { wireServices } from "../src/services.ts";

/** Writes openapi.json from the route schemas; CI fails when the committed copy drifts. */
const config = loadConfig({ DATA_DIR: "memory://openapi" });
const db = await openPglite("memory://");
const wired = await wireServices(config, db);
const app = await buildApp({ services: wired.services });
await app.ready();
writeFileSync(new URL("../openapi.json", import.meta.url), `${JSON.stringify(app.swagger(), null, 2)}\n`);
await app.close();
await wired.close();
await db.close();
console.log("wrote openapi.json");
