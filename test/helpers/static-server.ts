import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, normalize, sep } from 'node:path';

export interface StaticServer {
  /** `http://127.0.0.1:<port>`: the origin of the pages it serves. */
  readonly origin: string;
  close(): Promise<void>;
}

const TYPES: Readonly<Record<string, string>> = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };

/** Serves the files under `root` (GET only) on a free loopback port: a page of another origin than the API. */
export async function startStaticServer(root: string): Promise<StaticServer> {
  const base = normalize(root) + sep;
  const server = createServer((req, res) => {
    const path = normalize(join(base, decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname)));
    if (req.method !== 'GET' || !path.startsWith(base)) {
      res.writeHead(req.method === 'GET' ? 404 : 405).end();
      return;
    }
    readFile(path).then(
      (body) => res.writeHead(200, { 'Content-Type': TYPES[extname(path)] ?? 'application/octet-stream' }).end(body),
      () => res.writeHead(404).end(),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
