/**
 * `kubectl opkit db promote <database> <instance>` (a kubectl plugin: put operators/database/bin on PATH),
 * also `node operators/database/src/cli/kubectl-opkit.ts db promote ...`: a planned switchover. It sets the
 * Database's `myapp.example.com/switchover-to` annotation (which the operator consumes) and follows
 * status.failover until the switchover completed, printing each phase.
 *
 *   kubectl opkit db promote pg pg-1 [-n NAMESPACE] [--kubeconfig PATH] [--context NAME] [--no-wait]
 */
import { parseArgs } from 'node:util';
import { createClient, loadConfig } from '@opkit/runtime';
import { ANNOTATION_SWITCHOVER_TO, type Database, Databases } from '../api/v1/database.ts';

export const USAGE = `Usage: kubectl opkit db promote <database> <instance> [-n NAMESPACE] [--kubeconfig PATH]
         [--context NAME] [--no-wait] [--timeout SECONDS]

Switches the primary of a PostgreSQL Database over to <instance> (a pod of the Database, e.g. pg-1): the
operator fences the current primary with a clean shutdown (every acknowledged write reaches the replicas),
promotes <instance>, and the others follow it.
`;

export async function main(argv: readonly string[], out = process.stdout): Promise<number> {
  const { values, positionals } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: {
      namespace: { type: 'string', short: 'n' },
      kubeconfig: { type: 'string' },
      context: { type: 'string' },
      'no-wait': { type: 'boolean' },
      timeout: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [group, verb, name, instance] = positionals;
  if (values.help || group !== 'db' || verb !== 'promote' || !name || !instance) {
    out.write(USAGE);
    return values.help ? 0 : 2;
  }
  const config = await loadConfig({
    ...(values.kubeconfig ? { kubeconfig: values.kubeconfig } : {}),
    ...(values.context ? { context: values.context } : {}),
  });
  const namespace = values.namespace ?? config.namespace ?? 'default';
  const client = createClient(config, { fieldManager: 'kubectl-opkit' });
  try {
    const key = { namespace, name };
    const before = (await client.get(Databases.resource, key)) as Database;
    if (before.spec.engine !== 'postgres') {
      out.write(
        `${namespace}/${name} is a ${before.spec.engine} Database: switchover is for postgres only\n`,
      );
      return 1;
    }
    const startedAfter = before.status?.lastFailover?.completedAt;
    await client.patch(Databases.resource, key, {
      type: 'merge',
      body: { metadata: { annotations: { [ANNOTATION_SWITCHOVER_TO]: instance } } },
    });
    out.write(`switchover of ${namespace}/${name} to ${instance} asked for\n`);
    if (values['no-wait']) return 0;
    const deadline = Date.now() + Number(values.timeout ?? 300) * 1000;
    let last = '';
    while (Date.now() < deadline) {
      const db = (await client.get(Databases.resource, key)) as Database;
      const f = db.status?.failover;
      const line = f ? `${f.phase}${f.to ? ` -> ${f.to}` : ''}${f.message ? `: ${f.message}` : ''}` : '';
      if (line && line !== last) out.write(`  ${line}\n`);
      last = line || last;
      const done = db.status?.lastFailover;
      if (!f && done && done.completedAt !== startedAfter) {
        out.write(`${done.to} is the primary (timeline ${done.timeline ?? '?'})\n`);
        return done.to === instance ? 0 : 1;
      }
      if (!f && !db.metadata.annotations?.[ANNOTATION_SWITCHOVER_TO] && !last) {
        out.write('the operator refused it: see `kubectl describe db` (Warning SwitchoverRefused)\n');
        return 1;
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
    out.write('not completed within the timeout: see `kubectl get db -o yaml` (status.failover)\n');
    return 1;
  } finally {
    client.close();
  }
}

if (import.meta.main) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
}
