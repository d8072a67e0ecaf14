/** A plain-HTTP server on 127.0.0.1 for client tests, and a RestConfig that points at it without credentials. */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RestConfig } from '../../src/client/config.ts';

export interface LocalServer {
  server: http.Server;
  config: RestConfig;
  /** Closes every connection and the server. */
  close(): Promise<void>;
}

export async function startLocalServer(handler: http.RequestListener): Promise<LocalServer> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    server,
    config: {
      server: `http://127.0.0.1:${port}`,
      host: `127.0.0.1:${port}`,
      namespace: 'ns',
      authenticate: async () => ({ headers: {} }),
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
