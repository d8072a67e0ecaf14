/** opkit deploy / undeploy: the rendered config/default (CRDs, RBAC, manager) with the image set. */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { bool, required, str } from '../args.ts';
import { CliError, UsageError } from '../errors.ts';
import { step } from '../io.ts';
import { type KubeObject, render, setManagerImage, setNamespace } from '../kube/render.ts';
import { waitForRollout } from '../kube/rollout.ts';
import { readProject } from '../project.ts';
import type { Command } from './command.ts';
import { withCluster } from './install.ts';

/** The objects deploy applies: config/default rendered, the manager's image and the namespace set. */
export function renderDeployment(dir: string, opts: { image?: string; namespace?: string }): KubeObject[] {
  readProject(dir);
  const base = join(dir, 'config/default');
  if (!existsSync(base))
    throw new CliError(
      'config/default is missing',
      'restore it (opkit init writes it), then run opkit generate',
    );
  const objects = render(base);
  if (opts.namespace) setNamespace(objects, opts.namespace);
  if (opts.image !== undefined && setManagerImage(objects, opts.image) === 0) {
    throw new CliError(
      'config/default has no manager Deployment (labelled control-plane: controller-manager, container "manager")',
      'run opkit generate to write config/manager again',
    );
  }
  return objects;
}

export const deployCommand: Command = {
  name: 'deploy',
  summary: 'deploy the operator: CRDs, RBAC and the manager Deployment with the image',
  options: { image: { type: 'string' }, wait: { type: 'boolean' }, timeout: { type: 'string' } },
  help: `Usage: opkit deploy --image <img> [--no-wait] [--timeout <s>] [--namespace <ns>] [--kubeconfig <path>] [--context <name>] [--local]

Renders config/default (kustomize: the CRDs, RBAC and the manager in <project>-system), sets the manager's
image and server-side applies everything, the namespace first, then waits until the manager Deployment is
Ready, showing its pods' progress. It fails at once when the pods cannot start (ErrImageNeverPull or
ImagePullBackOff: the image is not on the node; CrashLoopBackOff: with the container's last log lines).
\`kubectl apply -k config/default\` deploys the same objects (with the placeholder image).

Flags:
  --image <img>         the operator image, e.g. registry.example.com/database-operator:v0.1.0
  --no-wait             return once applied, without waiting for the manager
  --timeout <s>         how long to wait for the manager to be Ready (default 300)
  -n, --namespace <ns>  deploy the manager to this namespace instead of <project>-system

Examples:
  opkit build --image registry.example.com/database-operator:v0.1.0 && docker push registry.example.com/database-operator:v0.1.0
  opkit deploy --image registry.example.com/database-operator:v0.1.0
  opkit build --image opkit.local/database-operator:dev --load && opkit deploy --image opkit.local/database-operator:dev --local`,

  async run(ctx, { values, globals }) {
    const image = required(
      values,
      'image',
      'deploy',
      'opkit deploy --image registry.example.com/my-operator:v0.1.0',
    );
    const project = readProject(ctx.cwd);
    const objects = renderDeployment(ctx.cwd, {
      image,
      ...(globals.namespace ? { namespace: globals.namespace } : {}),
    });
    const timeout = Number(str(values, 'timeout') ?? '300');
    if (!Number.isFinite(timeout) || timeout <= 0)
      throw new UsageError(
        `--timeout must be a number of seconds, not "${str(values, 'timeout')}"`,
        'e.g. --timeout 300',
      );
    const ns = objects.find((o) => o.kind === 'Namespace')?.metadata.name ?? globals.namespace ?? 'default';
    const manager = objects.find(
      (o) => o.kind === 'Deployment' && o.metadata.labels?.['control-plane'] === 'controller-manager',
    );
    await withCluster(ctx, globals, async (applier, server, client) => {
      step(
        ctx.io,
        `deploying ${project.projectName} (${objects.length} objects, image ${image}) to ${server}`,
      );
      await applier.apply(objects);
      if (!manager || !bool(values, 'wait', true)) return;
      step(ctx.io, `waiting for the manager Deployment ${ns}/${manager.metadata.name} to be Ready`);
      await waitForRollout(client, {
        namespace: manager.metadata.namespace ?? ns,
        name: manager.metadata.name,
        selector: 'control-plane=controller-manager',
        image,
        timeoutMs: timeout * 1000,
        io: ctx.io,
      });
    });
    ctx.io.out(`deployed ${project.projectName} to namespace ${ns} with image ${image}`);
    ctx.io.out(`next: kubectl -n ${ns} get deployment,pods (opkit undeploy removes it)`);
    return 0;
  },
};

export const undeployCommand: Command = {
  name: 'undeploy',
  summary: 'remove what deploy applied (the CRDs, and so their objects, too)',
  options: {},
  help: `Usage: opkit undeploy [--namespace <ns>] [--kubeconfig <path>] [--context <name>] [--local]

Deletes the objects of config/default from the cluster: the manager, its RBAC, its namespace and the CRDs
(every object of these kinds goes with them). Objects that are not there are skipped.

Examples:
  opkit undeploy
  opkit undeploy --local`,

  async run(ctx, { globals }) {
    const project = readProject(ctx.cwd);
    const objects = renderDeployment(ctx.cwd, globals.namespace ? { namespace: globals.namespace } : {});
    await withCluster(ctx, globals, async (applier, server) => {
      step(ctx.io, `removing ${project.projectName} (${objects.length} objects) from ${server}`);
      await applier.remove(objects);
    });
    ctx.io.out(`undeployed ${project.projectName}`);
    return 0;
  },
};
