/**
 * Go tools opkit builds on demand, like the control plane (pinned wrapper module under go/, built from the
 * Go module proxy, verified, cached in the cache directory, one build at a time across processes), but
 * only when a command or test needs them: today Helm, for installing charts into a local cluster.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { HELM } from './components.ts';
import { buildComponent, checkGo, formatElapsed, type InstallOptions } from './install.ts';
import { withLock } from './lock.ts';
import { toolDir } from './paths.ts';

/** The cached helm binary, or undefined when it was not built yet. Does not build. */
export function findHelm(): string | undefined {
  const path = join(toolDir(HELM.module), 'bin', 'helm');
  return existsSync(path) ? path : undefined;
}

/**
 * Builds helm (packages/controlplane/go/helm/go.mod pins the release) into
 * `<cache>/tools/helm-<fingerprint>/bin/helm` unless it is there, and resolves to its path.
 */
export async function installHelm(opts: InstallOptions = {}): Promise<string> {
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  if (!opts.force) {
    const found = findHelm();
    if (found) return found;
  }
  const goVersion = checkGo();
  const dir = toolDir(HELM.module);
  const bin = join(dir, 'bin');
  mkdirSync(bin, { recursive: true });
  return withLock(
    join(dir, 'install.lock'),
    (pid) => log(`[opkit] another process (pid ${pid}) is building helm; waiting for it`),
    async () => {
      const path = join(bin, 'helm');
      if (!opts.force && existsSync(path)) return path;
      log(`[opkit] building helm with ${goVersion} into ${bin} (first use only)`);
      const started = Date.now();
      await buildComponent(HELM, { binDir: bin, binaries: { helm: path } }, log, opts.force ?? false);
      log(`[opkit] helm ready (${formatElapsed(Date.now() - started)})`);
      return path;
    },
  );
}
