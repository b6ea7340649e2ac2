/**
 * A TCP forwarder on a port of its own, standing where production puts a proxy or a DNS name in
 * front of PostgreSQL (HAProxy, PgBouncer, a cloud endpoint): the service connects to it, and the
 * test points it at another server when it fails over. `pg` takes one host per connection
 * string (no `target_session_attrs`), so this is how a failover reaches the service.
 */
import net from "node:net";
import { freePort } from "./ports.ts";

export interface TcpProxy {
  readonly port: number;
  /** Sends new connections to `port` from now on; open ones are left as they are. */
  retarget(port: number): void;
  /** Cuts every open connection, as a proxy does when its backend goes away. */
  dropAll(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  let target = targetPort;
  const open = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target, "127.0.0.1");
    open.add(client);
    open.add(upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  const port = await freePort();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve());
  });
  return {
    port,
    retarget(p) {
      target = p;
    },
    dropAll() {
      for (const s of open) s.destroy();
      open.clear();
    },
    async close() {
      for (const s of open) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
