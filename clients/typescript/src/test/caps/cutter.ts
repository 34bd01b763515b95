/**
 * A TCP relay in front of the memory API that can cut a connection on the
 * client's side only: the client sees its stream drop at once, while the API
 * keeps its side (and the stream's slot) until `holdMs` later, as when a
 * balancer or a flaky network drops a connection and the server learns late.
 */
import net from "node:net";

interface Pair {
  client: net.Socket;
  upstream: net.Socket;
}

export interface Cutter {
  /** The relay's base URL (http://127.0.0.1:PORT). */
  url: string;
  /** Drop every open connection's client side now, its API side `holdMs` later. */
  cut(holdMs: number): void;
  close(): Promise<void>;
}

export async function cutter(target: URL): Promise<Cutter> {
  const pairs = new Set<Pair>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    const pair = { client, upstream };
    pairs.add(pair);
    const end = (): void => {
      client.destroy();
      upstream.destroy();
      pairs.delete(pair);
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    cut(holdMs: number): void {
      for (const pair of [...pairs]) {
        pairs.delete(pair);
        const { client, upstream } = pair;
        client.removeAllListeners("close").removeAllListeners("error").on("error", () => {});
        upstream.removeAllListeners("close").removeAllListeners("error").on("error", () => {});
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.destroy();
        setTimeout(() => upstream.destroy(), holdMs);
      }
    },
    async close(): Promise<void> {
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
