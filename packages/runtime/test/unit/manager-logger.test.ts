/**
 * The manager's structured logger (log/): JSON lines, levels, and no secrets in the output.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createLogger, isSecretKey, REDACTED, redactSecrets } from '../../src/log/index.ts';

function capture(level: 'info' | 'debug' = 'info') {
  const lines: Record<string, unknown>[] = [];
  const destination = { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) };
  return { lines, logger: createLogger({ level, name: 'test', destination }) };
}

describe('createLogger', () => {
  test('writes JSON lines with level label, ISO time, name and message', () => {
    const { lines, logger } = capture();
    logger.info({ controller: 'db', key: 'ns/name' }, 'reconciled');
    logger.debug('not written at info');
    assert.equal(lines.length, 1);
    const line = lines[0]!;
    assert.equal(line.level, 'info');
    assert.equal(line.name, 'test');
    assert.equal(line.msg, 'reconciled');
    assert.equal(line.controller, 'db');
    assert.equal(line.key, 'ns/name', 'object keys are not secrets');
    assert.match(String(line.time), /^\d{4}-\d\d-\d\dT/);
    assert.equal('pid' in line, false);
  });

  test('redacts passwords, tokens and Secret data at any depth, in bindings and errors too', () => {
    const { lines, logger } = capture();
    const child = logger.child({ apiToken: 'tok-1', secretName: 'db-credentials' });
    const err = Object.assign(new Error('login failed'), { password: 'hunter2' });
    child.error(
      {
        err,
        config: { user: 'admin', password: 'hunter2', nested: [{ 'client-key-data': 'LS0t' }] },
        headers: { Authorization: 'Bearer abc.def' },
        obj: {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: 'db-credentials' },
          data: { password: 'aHVudGVyMg==', username: 'YWRtaW4=' },
          stringData: { url: 'postgres://admin:hunter2@db' },
        },
      },
      'sent Bearer xyz.123 to the server',
    );
    const text = JSON.stringify(lines);
    for (const secret of ['hunter2', 'tok-1', 'LS0t', 'abc.def', 'aHVudGVyMg', 'YWRtaW4', 'xyz.123']) {
      assert.equal(text.includes(secret), false, `${secret} leaked: ${text}`);
    }
    const line = lines[0] as {
      apiToken: string;
      secretName: string;
      msg: string;
      obj: { data: Record<string, string>; metadata: { name: string } };
      config: { user: string };
      err: { message: string; password: string };
    };
    assert.equal(line.apiToken, REDACTED);
    assert.equal(line.secretName, 'db-credentials');
    assert.deepEqual(line.obj.data, { password: REDACTED, username: REDACTED });
    assert.equal(line.obj.metadata.name, 'db-credentials');
    assert.equal(line.config.user, 'admin');
    assert.equal(line.err.message, 'login failed');
    assert.equal(line.err.password, REDACTED);
    assert.equal(line.msg, `sent Bearer ${REDACTED} to the server`);
  });

  test('redactSecrets copies, handles cycles, and leaves the input alone', () => {
    const input: Record<string, unknown> = { token: 't', keep: 1 };
    input.self = input;
    const out = redactSecrets(input) as Record<string, unknown>;
    assert.equal(out.token, REDACTED);
    assert.equal(out.keep, 1);
    assert.equal(out.self, '[Circular]');
    assert.equal(input.token, 't');
    assert.equal(isSecretKey('dbPassword'), true);
    assert.equal(isSecretKey('client_secret'), true);
    assert.equal(isSecretKey('tokenFile'), false);
    assert.equal(isSecretKey('resourceVersion'), false);
  });
});
