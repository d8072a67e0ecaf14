/** The `opkit` bin starts from any Node: run by path with an old Node (Node 20 here) it still works. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { REPO_ROOT, run } from '../helpers.ts';

const PKG = fileURLToPath(new URL('../../package.json', import.meta.url));

function oldNode(): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const r = spawnSync(join(dir, 'node'), ['--version'], { encoding: 'utf8' });
    if (r.status === 0 && Number(/^v(\d+)/.exec(r.stdout)?.[1] ?? 0) < 24) return join(dir, 'node');
  }
  return undefined;
}
const OLD = oldNode();

test('the opkit bin run by an old Node prints the usage, and a wrong command exits 2 with a hint', {
  skip: OLD ? false : 'no Node older than 24 on PATH',
  timeout: 60_000,
}, async () => {
  const bin = (JSON.parse(readFileSync(PKG, 'utf8')) as { bin: { opkit: string } }).bin.opkit;
  const path = fileURLToPath(new URL(`../../${bin}`, import.meta.url));
  const help = await run(OLD!, [path, '--help'], REPO_ROOT);
  assert.equal(help.code, 0, help.stderr);
  assert.match(help.stdout, /Usage: opkit <command>/);
  const wrong = await run(OLD!, [path, 'bogus'], REPO_ROOT);
  assert.equal(wrong.code, 2);
  assert.match(wrong.stderr, /unknown command "bogus"/);
});
