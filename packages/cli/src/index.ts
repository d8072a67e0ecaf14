/**
 * @opkit/cli as a library: what the `opkit` command does, for scripts (a project's scripts/generate.ts)
 * and tests.
 */
export { COMMANDS, MAIN_HELP, type RunOptions, runCli } from './cli.ts';
export { type CreateApiOptions, planCreateApi, registerController } from './commands/create-api.ts';
export { initFiles } from './commands/init.ts';
export { CliError, UsageError } from './errors.ts';
export {
  applyPlan,
  type GeneratedFile,
  type GenerateReport,
  type GenerationPlan,
  generate,
  planGeneration,
} from './generate/index.ts';
export type { PolicyRule, RbacRule, RbacVerb } from './generate/rbac-types.ts';
export { type Io, memoryIo } from './io.ts';
export * from './names.ts';
export { type Project, type ProjectResource, readProject } from './project.ts';
