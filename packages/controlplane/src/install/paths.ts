import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { allModules, GO_MODULES_DIR } from './components.ts';

/**
 * Where built binaries are cached: $OPKIT_CACHE_DIR, else $XDG_CACHE_HOME/opkit, else ~/.cache/opkit.
 * Outside the repository so fresh clones and CI runs on the same machine reuse one build.
 */
export function cacheRoot(): string {
  if (process.env.OPKIT_CACHE_DIR) return process.env.OPKIT_CACHE_DIR;
  const xdg = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
  return join(xdg, 'opkit');
}

/**
 * A content hash of every wrapper go.mod and go.sum: any pin change gets a new directory, so an
 * old build is never mistaken for the current one.
 */
export function buildFingerprint(): string {
  return modulesFingerprint(allModules());
}

function modulesFingerprint(modules: string[]): string {
  const hash = createHash('sha256');
  for (const module of modules) {
    for (const file of ['go.mod', 'go.sum', ...(module === 'coredns' ? ['main.go'] : [])]) {
      hash.update(`${module}/${file}\n`);
      hash.update(readFileSync(join(GO_MODULES_DIR, module, file)));
    }
  }
  return hash.digest('hex').slice(0, 12);
}

export function binDir(): string {
  return join(cacheRoot(), 'controlplane', buildFingerprint(), 'bin');
}

export function dataDir(): string {
  return join(cacheRoot(), 'controlplane', buildFingerprint());
}

/** A tool's cache directory (tools/<module>-<fingerprint of its go.mod and go.sum>), apart from the control plane's. */
export function toolDir(module: string): string {
  return join(cacheRoot(), 'tools', `${module}-${modulesFingerprint([module])}`);
}
