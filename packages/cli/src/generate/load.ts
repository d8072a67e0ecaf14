/**
 * Loads a project's modules (schemas, controllers) into this process. A project that has not run
 * `npm install` yet can still be generated: `@opkit/*` imports it cannot resolve itself are resolved
 * from the CLI's own dependencies instead.
 */
import { existsSync, globSync, statSync } from 'node:fs';
import { registerHooks } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { CliError } from '../errors.ts';

let hooked = false;

function installFallbackResolution(): void {
  if (hooked) return;
  hooked = true;
  const fallbackParent = import.meta.url;
  registerHooks({
    resolve(specifier, context, nextResolve) {
      try {
        return nextResolve(specifier, context);
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (
          specifier.startsWith('@opkit/') &&
          (code === 'ERR_MODULE_NOT_FOUND' || code === 'ERR_PACKAGE_PATH_NOT_EXPORTED')
        ) {
          return nextResolve(specifier, { ...context, parentURL: fallbackParent });
        }
        throw err;
      }
    },
  });
}

/** Project files matching `pattern` (relative, sorted), without tests and declaration files. */
export function projectFiles(dir: string, pattern: string): string[] {
  if (!existsSync(dir)) return [];
  return globSync(pattern, { cwd: dir })
    .filter((f) => !f.endsWith('.test.ts') && !f.endsWith('.d.ts') && statSync(join(dir, f)).isFile())
    .map((f) => f.split('\\').join('/'))
    .sort();
}

/** Imports a project module; a failure names the file and says what to do. */
export async function importProjectModule(dir: string, file: string): Promise<Record<string, unknown>> {
  installFallbackResolution();
  const url = pathToFileURL(join(dir, file));
  // A fresh URL per file modification: generate in a long-lived process (tests, watch) sees edits.
  url.search = `?mtime=${statSync(join(dir, file)).mtimeMs}`;
  try {
    return (await import(url.href)) as Record<string, unknown>;
  } catch (err) {
    const e = err as Error & { code?: string };
    throw new CliError(
      `cannot load ${file}: ${e.message.split('\n')[0]}`,
      e.code === 'ERR_MODULE_NOT_FOUND'
        ? 'run npm install in the project, and check the imports of that file'
        : `fix ${file} (npm run typecheck shows type errors)`,
    );
  }
}
