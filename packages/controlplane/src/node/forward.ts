/** A TCP forwarder: the API server listens on loopback; nodes reach it on the cluster bridge's address. */
import { connect, createServer, type Server } from 'node:net';

export function forwardTcp(listenHost: string, listenPort: number, targetPort: number): Promise<Server> {
  const server = createServer((inbound) => {
    const outbound = connect(targetPort, '127.0.0.1');
    inbound.pipe(outbound);
    outbound.pipe(inbound);
    const close = () => {
      inbound.destroy();
      outbound.destroy();
    };
    inbound.on('error', close);
    outbound.on('error', close);
    inbound.on('close', close);
    outbound.on('close', close);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(listenPort, listenHost, () => resolve(server));
  });
}
