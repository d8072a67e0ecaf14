/** opkit generate: config/ from the schemas and the controllers' rbac declarations. */
import { bool } from '../args.ts';
import { CliError } from '../errors.ts';
import { applyPlan, planGeneration } from '../generate/index.ts';
import { step } from '../io.ts';
import type { Command } from './command.ts';

export const generateCommand: Command = {
  name: 'generate',
  summary: 'CRDs, RBAC and manager manifests in config/, from the schemas and controllers',
  options: { check: { type: 'boolean' } },
  help: `Usage: opkit generate [--check]

Loads every schema in src/api (the defineCustomResource results its modules export) and every controller
in src/controllers/<kind>/controller.ts (its \`rbac\` export: what it reads and writes), then writes:
  config/crd/bases/<group>_<plural>.yaml   the CRDs: openAPIV3Schema, subresources, printer columns, CEL rules
  config/rbac/role.yaml                    least privilege: the declared rules merged and sorted, no wildcards
  config/rbac/*.yaml, config/manager/*.yaml, config/crd and config/samples kustomizations
Output is stable: the same code always gives the same files (a second run changes nothing). The images:
of config/manager/kustomization.yaml are kept (kustomize edit set image controller=<img> survives).

An rbac declaration, in src/controllers/<kind>/controller.ts:
  export const rbac: RbacRule[] = [
    { resource: Databases.resource, verbs: ['get', 'list', 'watch'] },
    { resource: Databases.resource, subresource: 'status', verbs: ['get', 'patch', 'update'] },
    { resource: StatefulSets, verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] },
    { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'create'] },
  ];

Flags:
  --check               write nothing; exit 1 when config/ is not up to date (for CI)

Examples:
  opkit generate
  opkit generate --check || echo "run opkit generate and commit config/"`,

  async run(ctx, { values }) {
    const check = bool(values, 'check', false);
    step(ctx.io, 'loading the schemas (src/api) and controllers (src/controllers)');
    const plan = await planGeneration(ctx.cwd);
    const report = applyPlan(ctx.cwd, plan, { check });
    const kinds = plan.crds.map((c) => c.spec.names.kind).join(', ') || 'no kinds yet';
    if (check) {
      const stale = [...report.written, ...report.removed];
      if (stale.length > 0) {
        throw new CliError(`config/ is not up to date: ${stale.join(', ')}`, 'run opkit generate');
      }
      ctx.io.out(`config/ is up to date (${kinds}; ${plan.rules.length} RBAC rules)`);
      return 0;
    }
    for (const f of report.written) ctx.io.err(`  wrote ${f}`);
    for (const f of report.removed) ctx.io.err(`  removed ${f}`);
    const changed = report.written.length + report.removed.length;
    ctx.io.out(
      changed === 0
        ? `config/ is up to date (${kinds}; ${plan.rules.length} RBAC rules)`
        : `generated config/ for ${kinds}: ${report.written.length} written, ${report.removed.length} removed, ${report.unchanged.length} unchanged`,
    );
    return 0;
  },
};
