/**
 * The WebSocket executor against a local server speaking the remote command protocol (v5/v4.channel.k8s.io)
 * the way the API server does: output frames, the exit Status on channel 3, then a close. The real API
 * server and kubelet are in test/integration/exec-real-nodes.test.ts.
 */
import assert from 'node:assert/strict';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, beforeEach, describe, test } from 'node:test';
import { WebSocket, WebSocketServer } from 'ws';
import type { RequestAuth, RestConfig } from '../../src/client/config.ts';
import {
  ConnectionError,
  ForbiddenError,
  NotFoundError,
  UnauthorizedError,
} from '../../src/client/errors.ts';
import type { RequestMetric } from '../../src/client/http.ts';
import {
  ContainerNotFoundError,
  ContainerNotRunningError,
  ExecTimeoutError,
  newPodExecutor,
  V4_PROTOCOL,
  V5_PROTOCOL,
} from '../../src/exec/index.ts';

interface Session {
  ws: WebSocket;
  url: URL;
  headers: http.IncomingHttpHeaders;
  /** Resolves with stdin once the client closed it (v5) or after `ms` (v4). */
  stdin(ms?: number): Promise<Buffer>;
}

/** How the server answers an upgrade: refuse with an HTTP status and body, or run `session`. */
type Script =
  | { refuse: number; body: unknown }
  | { protocols?: readonly string[]; session: (s: Session) => void | Promise<void> };

const SUCCESS = JSON.stringify({ metadata: {}, status: 'Success' });
const exitStatus = (code: number) =>
  JSON.stringify({
    metadata: {},
    status: 'Failure',
    message: `command terminated with non-zero exit code: exit code ${code}`,
    reason: 'NonZeroExitCode',
    details: { causes: [{ reason: 'ExitCode', message: String(code) }] },
  });
const frame = (channel: number, data: string | Buffer) =>
  Buffer.concat([Buffer.from([channel]), Buffer.isBuffer(data) ? data : Buffer.from(data)]);

let server: http.Server;
let wss: WebSocketServer;
let port: number;
let script: Script;
const upgrades: { url: string; headers: http.IncomingHttpHeaders }[] = [];

before(async () => {
  wss = new WebSocketServer({
    noServer: true,
    handleProtocols: (offered) => {
      const supported = 'session' in script ? (script.protocols ?? [V5_PROTOCOL, V4_PROTOCOL]) : [];
      return [...offered].find((p) => supported.includes(p)) ?? false;
    },
  });
  server = http.createServer();
  server.on('upgrade', (req, socket, head) => {
    upgrades.push({ url: req.url ?? '', headers: req.headers });
    const current = script;
    if ('refuse' in current) {
      const body = JSON.stringify(current.body);
      socket.end(
        `HTTP/1.1 ${current.refuse} Refused\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const received: Buffer[] = [];
      let closed: (() => void) | undefined;
      ws.on('message', (data: Buffer) => {
        if (data[0] === 0) received.push(Buffer.from(data.subarray(1)));
        if (data[0] === 255 && data[1] === 0) closed?.();
      });
      const session: Session = {
        ws,
        url: new URL(req.url ?? '/', 'http://x'),
        headers: req.headers,
        stdin: (ms = 200) =>
          new Promise((resolve) => {
            const done = () => resolve(Buffer.concat(received));
            closed = done;
            if (ws.protocol === V4_PROTOCOL) setTimeout(done, ms);
          }),
      };
      void current.session(session);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
after(() => {
  for (const c of wss.clients) c.terminate();
  wss.close();
  server.close();
});
beforeEach(() => {
  upgrades.length = 0;
});

/** A configuration by hand: `tokens` are handed out in turn by refreshCredentials. */
function config(tokens: string[] = ['t1']): RestConfig & { refreshes: number } {
  let current = 0;
  const cfg = {
    server: `http://127.0.0.1:${port}`,
    host: `127.0.0.1:${port}`,
    namespace: 'from-config',
    refreshes: 0,
    async authenticate(): Promise<RequestAuth> {
      return { headers: { Authorization: `Bearer ${tokens[current]}` } };
    },
    async refreshCredentials(): Promise<void> {
      cfg.refreshes++;
      current = Math.min(current + 1, tokens.length - 1);
    },
  };
  return cfg;
}

describe('newPodExecutor against a remote command server', () => {
  test('runs the command: the query names it, output and exit status come back', async () => {
    script = {
      session: ({ ws, url }) => {
        assert.deepEqual(url.searchParams.getAll('command'), ['sh', '-c', 'echo hi; echo oops >&2; exit 3']);
        ws.send(frame(1, '')); // the API server's empty initial frames
        ws.send(frame(1, 'hi\n'));
        ws.send(frame(2, 'oops\n'));
        ws.send(frame(3, exitStatus(3)));
        ws.close();
      },
    };
    const metrics: RequestMetric[] = [];
    const exec = newPodExecutor(config(), { onRequest: (m) => metrics.push(m) });
    const result = await exec.exec(
      { namespace: 'db', name: 'pg-0' },
      { container: 'postgres', command: ['sh', '-c', 'echo hi; echo oops >&2; exit 3'] },
    );
    assert.deepEqual(result, { stdout: 'hi\n', stderr: 'oops\n', exitCode: 3 });
    const [upgrade] = upgrades;
    assert.match(upgrade?.url ?? '', /^\/api\/v1\/namespaces\/db\/pods\/pg-0\/exec\?/);
    assert.match(upgrade?.url ?? '', /container=postgres/);
    assert.doesNotMatch(upgrade?.url ?? '', /stdin=/);
    assert.equal(upgrade?.headers.authorization, 'Bearer t1');
    assert.equal(upgrade?.headers['sec-websocket-protocol'], `${V5_PROTOCOL},${V4_PROTOCOL}`);
    assert.match(upgrade?.headers['user-agent'] ?? '', /^opkit\//);
    assert.deepEqual(
      metrics.map((m) => [m.method, m.code, m.host]),
      [['GET', '101', `127.0.0.1:${port}`]],
    );
  });

  test("the namespace defaults to the configuration's; output split across frames and UTF-8 is kept", async () => {
    const text = 'grüße ✓';
    const bytes = Buffer.from(text);
    script = {
      session: ({ ws }) => {
        ws.send(frame(1, bytes.subarray(0, 3))); // splits the ü
        ws.send(frame(1, bytes.subarray(3)));
        ws.send(frame(3, SUCCESS));
        ws.close();
      },
    };
    const result = await newPodExecutor(config()).exec({ name: 'p' }, { command: ['x'] });
    assert.equal(result.stdout, text);
    assert.match(upgrades[0]?.url ?? '', /^\/api\/v1\/namespaces\/from-config\/pods\/p\/exec/);
  });

  test('stdin is sent and closed (v5): the command reads it to EOF', async () => {
    script = {
      session: async ({ ws, url, stdin }) => {
        assert.equal(url.searchParams.get('stdin'), 'true');
        const input = await stdin();
        ws.send(frame(1, input));
        ws.send(frame(3, SUCCESS));
        ws.close();
      },
    };
    const input = 'x'.repeat(100_000);
    const result = await newPodExecutor(config()).exec({ name: 'p' }, { command: ['cat'], stdin: input });
    assert.equal(result.stdout, input);
  });

  test('v4 fallback: a server without v5 is answered over v4 (stdin sent, not closed)', async () => {
    script = {
      protocols: [V4_PROTOCOL],
      session: async ({ ws, stdin }) => {
        assert.equal(ws.protocol, V4_PROTOCOL);
        const input = await stdin(100);
        ws.send(frame(1, `got ${input.toString()}`));
        ws.send(frame(3, SUCCESS));
        ws.close();
      },
    };
    const result = await newPodExecutor(config()).exec(
      { name: 'p' },
      { command: ['head', '-c', '2'], stdin: new Uint8Array([104, 105]) },
    );
    assert.equal(result.stdout, 'got hi');
  });

  test('output beyond maxOutputBytes is dropped and the result says truncated; the exit code still arrives', async () => {
    script = {
      session: ({ ws }) => {
        for (let i = 0; i < 10; i++) ws.send(frame(1, Buffer.alloc(1000, 97)));
        ws.send(frame(2, 'small'));
        ws.send(frame(3, exitStatus(1)));
        ws.close();
      },
    };
    const result = await newPodExecutor(config(), { maxOutputBytes: 2500 }).exec(
      { name: 'p' },
      { command: ['x'] },
    );
    assert.equal(result.stdout.length, 2500);
    assert.equal(result.stderr, 'small');
    assert.equal(result.exitCode, 1);
    assert.deepEqual(result.truncated, { stdout: true, stderr: false });
  });

  test('a refused upgrade becomes the typed error, with the API server message', async () => {
    const exec = newPodExecutor(config());
    script = {
      refuse: 403,
      body: {
        kind: 'Status',
        status: 'Failure',
        reason: 'Forbidden',
        code: 403,
        message:
          'pods "p" is forbidden: User "u" cannot create resource "pods/exec" in API group "" in the namespace "db"',
      },
    };
    const forbidden = await exec
      .exec({ namespace: 'db', name: 'p' }, { command: ['x'] })
      .catch((e: unknown) => e);
    assert.ok(forbidden instanceof ForbiddenError, String(forbidden));
    assert.match(forbidden.message, /User "u" cannot create.*grant/);

    script = {
      refuse: 404,
      body: {
        kind: 'Status',
        status: 'Failure',
        reason: 'NotFound',
        code: 404,
        message: 'pods "p" not found',
      },
    };
    await assert.rejects(exec.exec({ name: 'p' }, { command: ['x'] }), NotFoundError);

    script = {
      refuse: 400,
      body: {
        kind: 'Status',
        status: 'Failure',
        reason: 'BadRequest',
        code: 400,
        message: 'container nope is not valid for pod p',
      },
    };
    await assert.rejects(
      exec.exec({ name: 'p' }, { container: 'nope', command: ['x'] }),
      (err: unknown) => err instanceof ContainerNotFoundError && /nope is not valid/.test(err.message),
    );
  });

  test('a Failure on the error channel (the kubelet could not start it) is a typed error', async () => {
    script = {
      session: ({ ws }) => {
        ws.send(
          frame(
            3,
            JSON.stringify({
              status: 'Failure',
              code: 500,
              reason: 'InternalError',
              message: 'unable to upgrade connection: container not found ("main")',
            }),
          ),
        );
        ws.close();
      },
    };
    await assert.rejects(
      newPodExecutor(config()).exec({ name: 'p' }, { command: ['x'] }),
      ContainerNotRunningError,
    );
  });

  test('401: credentials are refreshed and the exec retried once; a second 401 is UnauthorizedError', async () => {
    const unauthorized = {
      kind: 'Status',
      status: 'Failure',
      reason: 'Unauthorized',
      code: 401,
      message: 'Unauthorized',
    };
    const cfg = config(['old', 'new']);
    let calls = 0;
    script = { refuse: 401, body: unauthorized };
    const ok = {
      session: ({ ws }: Session) => {
        ws.send(frame(1, 'ok'));
        ws.send(frame(3, SUCCESS));
        ws.close();
      },
    };
    server.prependOnceListener('upgrade', () => {
      calls++;
      // The first upgrade is refused; the retry (with the new token) succeeds.
      server.prependOnceListener('upgrade', () => {
        calls++;
        script = ok;
      });
    });
    const result = await newPodExecutor(cfg).exec({ name: 'p' }, { command: ['x'] });
    assert.equal(result.stdout, 'ok');
    assert.equal(calls, 2);
    assert.equal(cfg.refreshes, 1);
    assert.deepEqual(
      upgrades.map((u) => u.headers.authorization),
      ['Bearer old', 'Bearer new'],
    );

    // Credentials that do not change are not retried.
    script = { refuse: 401, body: unauthorized };
    await assert.rejects(
      newPodExecutor(config(['same'])).exec({ name: 'p' }, { command: ['x'] }),
      UnauthorizedError,
    );
  });

  test('timeout: ExecTimeoutError with the output so far; abort: the signal reason', async () => {
    script = {
      session: ({ ws }) => {
        ws.send(frame(1, 'started\n'));
      },
    };
    const exec = newPodExecutor(config());
    const timedOut = await exec
      .exec({ name: 'p' }, { command: ['sleep'], timeoutMs: 200 })
      .catch((e: unknown) => e);
    assert.ok(timedOut instanceof ExecTimeoutError, String(timedOut));
    assert.equal(timedOut.stdout, 'started\n');
    assert.match(timedOut.message, /no exit status after 200ms/);

    const controller = new AbortController();
    const reason = new Error('shutting down');
    setTimeout(() => controller.abort(reason), 100);
    await assert.rejects(
      exec.exec({ name: 'p' }, { command: ['sleep'], signal: controller.signal }),
      (e) => e === reason,
    );
    await assert.rejects(exec.exec({ name: 'p' }, { command: ['sleep'], signal: AbortSignal.abort() }), {
      name: 'AbortError',
    });
    // The server sees the connections closed.
    await waitFor(() => [...wss.clients].every((c) => c.readyState === WebSocket.CLOSED));
  });

  test('connection failures: nothing listening; the stream closing before the exit status', async () => {
    const metrics: RequestMetric[] = [];
    const closed = await startClosedPort();
    const unreachable = newPodExecutor(
      { ...config(), server: `http://127.0.0.1:${closed}` },
      {
        onRequest: (m) => metrics.push(m),
      },
    );
    const err = await unreachable.exec({ name: 'p' }, { command: ['x'] }).catch((e: unknown) => e);
    assert.ok(err instanceof ConnectionError, String(err));
    assert.match(err.message, /ECONNREFUSED|connect/);
    assert.deepEqual(
      metrics.map((m) => m.code),
      ['<error>'],
    );

    script = {
      session: ({ ws }) => {
        ws.send(frame(1, 'partial'));
        ws.close();
      },
    };
    await assert.rejects(
      newPodExecutor(config()).exec({ name: 'p' }, { command: ['x'] }),
      (e: unknown) => e instanceof ConnectionError && /before the command's exit status/.test(e.message),
    );
  });

  test('bad input is refused before anything is sent, naming the field', async () => {
    const exec = newPodExecutor(config());
    await assert.rejects(
      exec.exec({ name: 'p' }, { command: [] }),
      /opts\.command must be a non-empty array/,
    );
    await assert.rejects(exec.exec({ name: '' }, { command: ['x'] }), /key\.name/);
    await assert.rejects(
      exec.exec({ name: 'p' }, { command: ['x'], timeoutMs: -1 }),
      /opts\.timeoutMs must be/,
    );
    assert.throws(() => newPodExecutor(config(), { maxOutputBytes: -1 }), /opts\.maxOutputBytes must be/);
    assert.throws(() => newPodExecutor(config(), { timeoutMs: Number.NaN }), /opts\.timeoutMs must be/);
    assert.equal(upgrades.length, 0);
  });
});

async function waitFor(check: () => boolean, ms = 5000): Promise<void> {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A port nothing listens on: bound, then closed. */
async function startClosedPort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const p = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return p;
}
