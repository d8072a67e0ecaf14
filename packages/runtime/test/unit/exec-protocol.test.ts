/** Pod exec's pure parts: the request path, frames, bounded output, the exit Status and error mapping. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  ApiError,
  BadRequestError,
  ForbiddenError,
  NotFoundError,
  ServerError,
} from '../../src/client/errors.ts';
import {
  BoundedOutput,
  ContainerNotFoundError,
  ContainerNotRunningError,
  decodeFrame,
  execErrorFromStatus,
  execPath,
  NodeUnreachableError,
  parseExecStatus,
  stdinFrames,
  V4_PROTOCOL,
  V5_PROTOCOL,
} from '../../src/exec/index.ts';

describe('execPath', () => {
  test('repeats command, names the container, asks for stdin only when sent', () => {
    assert.equal(
      execPath('db', 'pg-0', { container: 'postgres', command: ['sh', '-c', 'echo a&b=c'], stdin: false }),
      '/api/v1/namespaces/db/pods/pg-0/exec?command=sh&command=-c&command=echo%20a%26b%3Dc' +
        '&container=postgres&stdout=true&stderr=true',
    );
    assert.equal(
      execPath('db', 'pg-0', { command: ['cat'], stdin: true }),
      '/api/v1/namespaces/db/pods/pg-0/exec?command=cat&stdin=true&stdout=true&stderr=true',
    );
  });
});

describe('frames', () => {
  test('decodeFrame splits the channel byte from the data; an empty message is no frame', () => {
    const frame = decodeFrame(Buffer.from([2, 104, 105]));
    assert.equal(frame?.channel, 2);
    assert.equal(frame?.data.toString(), 'hi');
    assert.deepEqual(decodeFrame(Buffer.from([1]))?.data.length, 0);
    assert.equal(decodeFrame(Buffer.alloc(0)), undefined);
  });

  test('stdinFrames: data on channel 0 in chunks of 32 KiB, then v5 closes stdin with [255, 0]', () => {
    const data = Buffer.alloc(70 * 1024, 7);
    const v5 = stdinFrames(data, V5_PROTOCOL);
    assert.deepEqual(
      v5.map((f) => f.length),
      [32 * 1024 + 1, 32 * 1024 + 1, 6 * 1024 + 1, 2],
    );
    assert.ok(v5.slice(0, 3).every((f) => f[0] === 0));
    assert.deepEqual([...(v5[3] as Buffer)], [255, 0]);
    assert.equal(Buffer.concat(v5.slice(0, 3).map((f) => f.subarray(1))).equals(data), true);
    // v4 has no way to close a channel: the data only.
    assert.equal(stdinFrames(data, V4_PROTOCOL).length, 3);
    // Empty stdin: just the close.
    assert.deepEqual(
      stdinFrames(new Uint8Array(0), V5_PROTOCOL).map((f) => [...f]),
      [[255, 0]],
    );
  });

  test('BoundedOutput keeps at most max bytes and says it truncated', () => {
    const out = new BoundedOutput(5);
    out.push(Buffer.from('abc'));
    assert.equal(out.truncated, false);
    out.push(Buffer.from('defg'));
    out.push(Buffer.from('h'));
    assert.equal(out.text(), 'abcde');
    assert.equal(out.truncated, true);
    const exact = new BoundedOutput(3);
    exact.push(Buffer.from('abc'));
    assert.equal(exact.truncated, false);
  });

  test('BoundedOutput copies: reusing the message buffer does not change what was kept', () => {
    const out = new BoundedOutput(10);
    const message = Buffer.from([1, 120, 121]);
    out.push(message.subarray(1));
    message[1] = 122;
    assert.equal(out.text(), 'xy');
  });
});

describe('parseExecStatus', () => {
  test('Success is exit code 0', () => {
    assert.deepEqual(parseExecStatus('{"metadata":{},"status":"Success"}', 'ns'), { exitCode: 0 });
  });

  test('NonZeroExitCode carries the code in details.causes[reason=ExitCode]', () => {
    const status = {
      metadata: {},
      status: 'Failure',
      message:
        'command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3',
      reason: 'NonZeroExitCode',
      details: { causes: [{ reason: 'ExitCode', message: '3' }] },
    };
    assert.deepEqual(parseExecStatus(JSON.stringify(status), 'ns'), { exitCode: 3 });
  });

  test('a NonZeroExitCode without a readable code, or another Failure, is a typed error', () => {
    const noCode = parseExecStatus(
      JSON.stringify({ status: 'Failure', reason: 'NonZeroExitCode', message: 'exit code ?' }),
      'ns',
    );
    assert.ok('error' in noCode && noCode.error instanceof ServerError);
    const notStarted = parseExecStatus(
      JSON.stringify({
        status: 'Failure',
        reason: 'InternalError',
        code: 500,
        message: 'exec: "nope": executable file not found in $PATH',
      }),
      'ns',
    );
    assert.ok('error' in notStarted && notStarted.error instanceof ServerError);
    assert.match(notStarted.error.message, /executable file not found/);
    const gone = parseExecStatus(
      JSON.stringify({ status: 'Failure', code: 500, message: 'container not found ("main")' }),
      'ns',
    );
    assert.ok('error' in gone && gone.error instanceof ContainerNotRunningError);
  });

  test('text that is not a Status (protocols before v4) is an error with that text', () => {
    const outcome = parseExecStatus('something broke\n', 'ns');
    assert.ok('error' in outcome);
    assert.equal(outcome.error.message, 'something broke');
  });
});

describe('execErrorFromStatus', () => {
  const failure = (code: number, message: string) => ({
    kind: 'Status' as const,
    status: 'Failure' as const,
    code,
    message,
  });

  test('403 is ForbiddenError whose message says which RBAC to grant', () => {
    const err = execErrorFromStatus(
      failure(
        403,
        'pods "pg-0" is forbidden: User "system:serviceaccount:db:x" cannot create resource "pods/exec"',
      ),
      403,
      'db',
    );
    assert.ok(err instanceof ForbiddenError);
    assert.match(err.message, /cannot create resource "pods\/exec"/);
    assert.match(err.message, /verbs "get" and "create" on resource "pods\/exec" in namespace "db"/);
  });

  test('404 NotFound; container not in the spec; no node yet; other errors by code', () => {
    assert.ok(execErrorFromStatus(failure(404, 'pods "x" not found'), 404, 'ns') instanceof NotFoundError);
    const notInSpec = execErrorFromStatus(failure(400, 'container nope is not valid for pod x'), 400, 'ns');
    assert.ok(notInSpec instanceof ContainerNotFoundError && notInSpec instanceof BadRequestError);
    assert.ok(
      execErrorFromStatus(failure(400, 'pod x does not have a host assigned'), 400, 'ns') instanceof
        ContainerNotRunningError,
    );
    const choose = execErrorFromStatus(
      failure(400, 'a container name must be specified for pod x, choose one of: [a b]'),
      400,
      'ns',
    );
    assert.ok(choose instanceof BadRequestError && !(choose instanceof ContainerNotFoundError));
    // The API server's answer for a pod on a node whose kubelet it cannot reach (seen with a kwok node).
    const unreachable = execErrorFromStatus(
      failure(
        500,
        'Internal error occurred: error sending request: Post "https://127.0.0.1:10250/exec/ns/x/main?command=true": ' +
          'dial tcp 127.0.0.1:10250: connect: connection refused',
      ),
      0,
      'ns',
    );
    assert.ok(unreachable instanceof NodeUnreachableError);
    // containerd's answers for a container whose process is gone (seen on real nodes: a server that was
    // just stopped, a pod being deleted): not running, not an unknown server error.
    for (const gone of [
      'Internal error occurred: error executing command in container: failed to exec in container: failed to create exec "0610": cannot exec in a deleted state: unknown',
      'Internal error occurred: error executing command in container: failed to exec in container: failed to create exec "98ea": task f373757cca26 not found: not found',
      'Internal error occurred: error executing command in container: failed to exec in container: failed to create exec "1a2b": cannot exec in a stopped state: unknown',
    ]) {
      assert.ok(execErrorFromStatus(failure(500, gone), 0, 'ns') instanceof ContainerNotRunningError, gone);
    }
    const http = execErrorFromStatus({ message: 'bad gateway' }, 502, 'ns');
    assert.ok(http instanceof ApiError);
    assert.equal(http.code, 502);
  });
});
