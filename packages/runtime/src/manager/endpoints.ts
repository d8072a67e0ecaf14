/**
 * The manager's HTTP endpoints: /healthz and /readyz on the health probe address, /metrics on the
 * metrics address (one server when both addresses are the same fixed port).
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { MetricsRegistry } from '../metrics/registry.ts';
import type { HealthChecks } from './health.ts';
import { type BindAddress, closeServer, listen, sendText } from './server.ts';

export interface EndpointsOptions {
  /** Where to serve the probes (undefined: not served). */
  health: BindAddress | undefined;
  /** Where to serve /metrics (undefined: not served). */
  metrics: BindAddress | undefined;
  healthz: HealthChecks;
  readyz: HealthChecks;
  registry: MetricsRegistry;
  log: Logger;
}

export class Endpoints {
  readonly #opts: EndpointsOptions;
  #servers: Server[] = [];
  #healthAddress: string | undefined;
  #metricsAddress: string | undefined;

  constructor(opts: EndpointsOptions) {
    this.#opts = opts;
  }

  /** 'host:port' the health probes are served on, once started. */
  get healthAddress(): string | undefined {
    return this.#healthAddress;
  }

  /** 'host:port' /metrics is served on, once started. */
  get metricsAddress(): string | undefined {
    return this.#metricsAddress;
  }

  /** Starts the servers of the configured addresses (none when both are disabled). */
  async start(): Promise<void> {
    const health = this.#opts.health;
    const metrics = this.#opts.metrics;
    const log = this.#opts.log;
    const onError = (err: unknown): void => log.error({ err }, 'http server error');
    const same =
      health !== undefined &&
      metrics !== undefined &&
      health.port !== 0 &&
      health.port === metrics.port &&
      health.host === metrics.host;
    if (health) {
      const { server, address } = await listen(
        health,
        (req, res) => this.#handle(req, res, { probes: true, metrics: same }),
        onError,
      );
      this.#servers.push(server);
      this.#healthAddress = address;
      if (same) this.#metricsAddress = address;
      log.info({ address }, 'serving health probes');
    }
    if (metrics && !same) {
      const { server, address } = await listen(
        metrics,
        (req, res) => this.#handle(req, res, { probes: false, metrics: true }),
        onError,
      );
      this.#servers.push(server);
      this.#metricsAddress = address;
      log.info({ address }, 'serving metrics');
    }
  }

  async #handle(
    req: IncomingMessage,
    res: ServerResponse,
    serve: { probes: boolean; metrics: boolean },
  ): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const path = url.pathname;
    const route =
      serve.probes && (path === '/healthz' || path.startsWith('/healthz/'))
        ? 'healthz'
        : serve.probes && (path === '/readyz' || path.startsWith('/readyz/'))
          ? 'readyz'
          : serve.metrics && path === '/metrics'
            ? 'metrics'
            : undefined;
    if (!route) {
      sendText(req, res, 404, 'not found\n');
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('allow', 'GET, HEAD');
      sendText(req, res, 405, 'method not allowed\n');
      return;
    }
    if (route === 'healthz') await this.#opts.healthz.serve(req, res, url);
    else if (route === 'readyz') await this.#opts.readyz.serve(req, res, url);
    else sendText(req, res, 200, await this.#opts.registry.text(), this.#opts.registry.contentType);
  }

  /** Closes every server started. */
  async close(): Promise<void> {
    const servers = this.#servers;
    this.#servers = [];
    await Promise.all(servers.map((s) => closeServer(s)));
  }
}
