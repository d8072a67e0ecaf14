/** The manager's HTTP endpoints (health probes, metrics) on node:http. */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { nodeHttp } from '../util/node-http.ts';

export interface BindAddress {
  /** undefined: every interface. */
  host: string | undefined;
  port: number;
}

/**
 * Parses a bind address like controller-runtime's flags: 'host:port', ':port' (every interface),
 * '[::1]:port'; port 0 picks a free port. '', '0' or undefined: disabled (returns undefined).
 */
export function parseBindAddress(address: string | undefined): BindAddress | undefined {
  if (address === undefined || address === '' || address === '0') return undefined;
  const colon = address.lastIndexOf(':');
  if (colon < 0) throw new TypeError(`invalid bind address "${address}": expected host:port or :port`);
  let host = address.slice(0, colon);
  const portText = address.slice(colon + 1);
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port > 65535) {
    throw new TypeError(`invalid bind address "${address}": bad port "${portText}"`);
  }
  return { host: host === '' ? undefined : host, port };
}

/** 'host:port' of a listening server ('[::1]:8081' for IPv6). */
export function formatAddress(info: AddressInfo): string {
  return info.family === 'IPv6' || info.address.includes(':')
    ? `[${info.address}]:${info.port}`
    : `${info.address}:${info.port}`;
}

export type RequestHandler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

/** Listens on `bind`; resolves with the server and its bound address once it is listening. */
export function listen(
  bind: BindAddress,
  handler: RequestHandler,
  onError: (err: unknown) => void,
): Promise<{ server: Server; address: string }> {
  const server = nodeHttp.createServer((req, res) => {
    handler(req, res).catch((err: unknown) => {
      onError(err);
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
      res.end('internal error\n');
    });
  });
  // Probes and scrapes are short requests; do not let idle keep-alive sockets delay shutdown.
  server.keepAliveTimeout = 5_000;
  return new Promise((resolve, reject) => {
    const onListenError = (err: Error): void => reject(err);
    server.once('error', onListenError);
    server.listen({ port: bind.port, ...(bind.host !== undefined ? { host: bind.host } : {}) }, () => {
      server.off('error', onListenError);
      server.on('error', onError);
      resolve({ server, address: formatAddress(server.address() as AddressInfo) });
    });
  });
}

/** Stops accepting connections and closes the open ones; resolves once the server is closed. */
export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) {
      resolve();
      return;
    }
    // In-flight probe responses get a moment to finish, then the rest are cut.
    const cut = setTimeout(() => server.closeAllConnections(), 1_000);
    server.close(() => {
      clearTimeout(cut);
      resolve();
    });
    server.closeIdleConnections();
  });
}

/** Sends a plain-text response. HEAD requests get the headers only. */
export function sendText(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  body: string,
  contentType = 'text/plain; charset=utf-8',
): void {
  res.writeHead(status, {
    'content-type': contentType,
    'content-length': Buffer.byteLength(body),
    'x-content-type-options': 'nosniff',
    'cache-control': 'no-store',
  });
  res.end(req.method === 'HEAD' ? undefined : body);
}
