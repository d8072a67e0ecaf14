/**
 * A TCP proxy on loopback between the operator and the API server, to break the network the way real
 * networks break (TLS passes through untouched: the operator still talks to the API server's certificate):
 *   cut()       every open connection is reset at once (a load balancer or NAT dropping its table);
 *   stall()     no byte moves either way, on open and new connections, until resume() (a partition);
 *   halfOpen()  the open connections stall forever and are never closed (the far end gone without FIN),
 *               while new connections work (the re-routed path), until heal().
 * Like a load balancer in front of API servers, it takes connections only while the API server reports
 * ready (`upstreamReady`, kept by the caller from /readyz): a restarted kube-apiserver answers 403 for
 * a moment before its RBAC caches synced, which clients behind a real load balancer never see.
 * Loopback only; the proxy never retries or buffers beyond what the kernel holds for a paused socket.
 */
import { createServer, type Server, Socket } from 'node:net';

interface Pair {
  client: Socket;
  upstream: Socket;
  /** Stalled as half-open: this pair never moves a byte again. */
  dead: boolean;
}

export interface ProxyStats {
  /** Connections accepted so far. */
  accepted: number;
  /** Connections the proxy reset (cut). */
  cut: number;
  /** Connections left half-open (never closed, never forwarded). */
  halfOpen: number;
}

export class FaultProxy {
  readonly port: number;
  private readonly server: Server;
  private readonly pairs = new Set<Pair>();
  private stalled = false;
  /** Whether the API server reports ready; connections are refused (reset) while it does not. */
  upstreamReady = true;
  readonly stats: ProxyStats = { accepted: 0, cut: 0, halfOpen: 0 };

  private constructor(server: Server, port: number) {
    this.server = server;
    this.port = port;
  }

  /** A proxy on 127.0.0.1 (a free port) to target host:port. */
  static async start(targetHost: string, targetPort: number): Promise<FaultProxy> {
    let proxy: FaultProxy | undefined;
    const server = createServer({ pauseOnConnect: true }, (client) =>
      proxy?.accept(client, targetHost, targetPort),
    );
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('the fault proxy has no TCP port');
    proxy = new FaultProxy(server, address.port);
    return proxy;
  }

  private accept(client: Socket, host: string, port: number): void {
    if (!this.upstreamReady) {
      client.resetAndDestroy();
      return;
    }
    this.stats.accepted++;
    const upstream = new Socket();
    const pair: Pair = { client, upstream, dead: false };
    this.pairs.add(pair);
    const close = () => {
      // Half-open: the side that gave up closes; the other never learns, until heal().
      if (pair.dead) return;
      this.pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close);
    upstream.on('error', close);
    client.on('close', close);
    upstream.on('close', close);
    client.on('data', (chunk: Buffer) => {
      if (!pair.dead) upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!pair.dead) client.write(chunk);
    });
    upstream.pause();
    upstream.connect(port, host, () => {
      if (this.stalled || pair.dead) return;
      client.resume();
      upstream.resume();
    });
  }

  /** Resets every open connection. */
  cut(): number {
    let n = 0;
    for (const p of [...this.pairs]) {
      if (p.dead) continue;
      p.client.resetAndDestroy();
      p.upstream.destroy();
      n++;
    }
    this.stats.cut += n;
    return n;
  }

  /** Stops forwarding in both directions on every connection, open and new, until resume(). */
  stall(): void {
    this.stalled = true;
    for (const p of this.pairs) {
      p.client.pause();
      p.upstream.pause();
    }
  }

  resume(): void {
    this.stalled = false;
    for (const p of this.pairs) {
      if (p.dead) continue;
      p.client.resume();
      p.upstream.resume();
    }
  }

  /**
   * The open connections go silent for good (nothing forwarded, nothing closed: the client only learns
   * by its own timeouts); connections opened afterwards work.
   */
  halfOpen(): number {
    let n = 0;
    for (const p of this.pairs) {
      if (p.dead) continue;
      p.dead = true;
      p.client.pause();
      p.upstream.pause();
      n++;
    }
    this.stats.halfOpen += n;
    return n;
  }

  /** Ends the half-open connections (closes them both ways), as a peer coming back would. */
  heal(): void {
    for (const p of [...this.pairs]) {
      if (!p.dead) continue;
      this.pairs.delete(p);
      p.client.destroy();
      p.upstream.destroy();
    }
  }

  /** Open connections (half-open ones included). */
  get open(): number {
    return this.pairs.size;
  }

  async close(): Promise<void> {
    for (const p of this.pairs) {
      p.client.destroy();
      p.upstream.destroy();
    }
    this.pairs.clear();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
