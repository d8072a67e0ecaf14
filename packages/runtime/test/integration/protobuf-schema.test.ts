/**
 * The committed protobuf schema is what its generator writes from the Go types it names (go.mod): a
 * change of the generator or of the k8s.io/api version must come with the regenerated file. Needs Go
 * and the Go module proxy, as the control plane's build does.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

const TOOL = join(import.meta.dirname, '..', '..', 'tools', 'protobuf-schema');
const SCHEMA = join(import.meta.dirname, '..', '..', 'src', 'client', 'protobuf', 'schema.generated.ts');

test('schema.generated.ts is what tools/protobuf-schema generates', { timeout: 600_000 }, () => {
  const generated = execFileSync('go', ['run', '.'], {
    cwd: TOOL,
    encoding: 'utf8',
    env: { ...process.env, PATH: `${process.env.PATH}:/usr/local/go/bin` },
    maxBuffer: 16 * 1024 * 1024,
  });
  assert.ok(
    generated === readFileSync(SCHEMA, 'utf8'),
    'stale: cd packages/runtime/tools/protobuf-schema && go run . > ../../src/client/protobuf/schema.generated.ts',
  );
});
