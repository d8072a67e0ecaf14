/**
 * A TCP forwarder, run as its own process: the API server listens on loopback, nodes reach it on the cluster
 * bridge's address. Its own process, so a caller blocking its event loop (execSync in a test) never stalls
 * the kubelets. Usage: node forward.ts <listen host> <listen port> <target port on 127.0.0.1> <nodes dir>
 */
import { connect, createServer } from 'node:net';

const [host, listenPort, targetPort] = process.argv.slice(2);
const server = createServer((inbound) => {
  const outbound = connect(Number(targetPort), '127.0.0.1');
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
server.listen(Number(listenPort), host, () => process.stdout.write(`forwarding ${host}:${listenPort}\n`));
process.on('SIGTERM', () => process.exit(0));
