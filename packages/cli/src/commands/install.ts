/** opkit install / uninstall: the project's CRDs into / out of the cluster. */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RestClient } from '@opkit/runtime';
import { CliError } from '../errors.ts';
import { projectFiles } from '../generate/load.ts';
import { step } from '../io.ts';
import { Applier, kubeError } from '../kube/apply.ts';
import type { KubeObject } from '../kube/render.ts';
import { connect, resolveTarget } from '../kube/target.ts';
import { parseYamlDocuments } from '../yaml.ts';
import type { Command, CommandContext } from './command.ts';

export function readCrds(dir: string): KubeObject[] {
  const files = existsSync(join(dir, 'config/crd/bases')) ? projectFiles(dir, 'config/crd/bases/*.yaml') : [];
  const crds = files.flatMap(
    (f) => parseYamlDocuments(readFileSync(join(dir, f), 'utf8'), f) as KubeObject[],
  );
  const valid = crds.filter((c) => c?.kind === 'CustomResourceDefinition');
  if (valid.length === 0) {
    throw new CliError(
      'there are no CRDs in config/crd/bases',
      'add a kind (opkit create api ...) and run opkit generate',
    );
  }
  return valid;
}

async function withCluster(
  ctx: CommandContext,
  globals: Parameters<typeof resolveTarget>[0],
  action: (a: Applier, server: string, client: RestClient) => Promise<void>,
) {
  const target = resolveTarget(globals, ctx.io, ctx.env);
  const client = connect(target);
  try {
    await action(new Applier(client, ctx.io), client.config.server, client);
  } catch (err) {
    kubeError(err, client.config.server);
  } finally {
    client.close();
  }
}

export const installCommand: Command = {
  name: 'install',
  summary: 'install the CRDs (config/crd/bases) into the cluster',
  options: {},
  help: `Usage: opkit install [--kubeconfig <path>] [--context <name>] [--local]

Server-side applies the CRDs in config/crd/bases to the cluster and waits until they are established.
Run opkit generate first after changing a schema.

Examples:
  opkit install
  opkit install --local                       # into the cluster of opkit cluster up
  opkit install --kubeconfig ~/.kube/staging --context admin`,

  async run(ctx, { globals }) {
    const crds = readCrds(ctx.cwd);
    await withCluster(ctx, globals, async (applier, server) => {
      step(ctx.io, `installing ${crds.length} CRD${crds.length === 1 ? '' : 's'} into ${server}`);
      await applier.apply(crds);
    });
    ctx.io.out(`installed ${crds.map((c) => c.metadata.name).join(', ')}`);
    return 0;
  },
};

export const uninstallCommand: Command = {
  name: 'uninstall',
  summary: 'remove the CRDs (and so every object of their kinds) from the cluster',
  options: {},
  help: `Usage: opkit uninstall [--kubeconfig <path>] [--context <name>] [--local]

Deletes the CRDs in config/crd/bases from the cluster. Every object of these kinds is deleted with them.

Examples:
  opkit uninstall
  opkit uninstall --local`,

  async run(ctx, { globals }) {
    const crds = readCrds(ctx.cwd);
    await withCluster(ctx, globals, async (applier, server) => {
      step(ctx.io, `removing ${crds.length} CRD${crds.length === 1 ? '' : 's'} from ${server}`);
      await applier.remove(crds);
    });
    ctx.io.out(`uninstalled ${crds.map((c) => c.metadata.name).join(', ')}`);
    return 0;
  },
};

export { withCluster };
