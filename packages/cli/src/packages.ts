/**
 * Where this checkout's @opkit packages are: a new project depends on them by `file:` path (--runtime
 * local) or on packed copies in its vendor/ folder (--runtime tarball) until they are published.
 */
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CliError } from './errors.ts';

export type OpkitPackage = '@opkit/runtime' | '@opkit/controlplane' | '@opkit/cli';

export const CLI_ROOT = realpathSync(fileURLToPath(new URL('..', import.meta.url)));

/** The folder (with package.json) of an @opkit package, as the CLI itself resolves it. */
export function packageDir(name: OpkitPackage): string {
  if (name === '@opkit/cli') return CLI_ROOT;
  let entry: string;
  try {
    entry = fileURLToPath(import.meta.resolve(name));
  } catch (err) {
    throw new CliError(
      `cannot find ${name} from ${CLI_ROOT}: ${(err as Error).message}`,
      'run npm install in the opkit checkout',
    );
  }
  for (let dir = dirname(realpathSync(entry)); dir !== dirname(dir); dir = dirname(dir)) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg) && (JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string }).name === name) {
      return dir;
    }
  }
  throw new CliError(`cannot find the package folder of ${name}`, 'run npm install in the opkit checkout');
}

export function packageVersion(name: OpkitPackage): string {
  const pkg = JSON.parse(readFileSync(join(packageDir(name), 'package.json'), 'utf8')) as { version: string };
  return pkg.version;
}

/** 'opkit-runtime': the vendor/ folder name of a packed package. */
export function vendorName(name: OpkitPackage): string {
  return name.replace('@', '').replace('/', '-');
}

/**
 * Packs a package with `npm pack` into `vendorDir` and unpacks it next to the tarball, in
 * vendor/<opkit-name>/. Projects depend on the unpacked folder: the packages ship TypeScript sources,
 * and Node does not strip types of files under node_modules, so they must not be copied there.
 * Returns the folder's path relative to the project (`vendor/opkit-runtime`).
 */
export function packInto(name: OpkitPackage, vendorDir: string): { tarball: string; folder: string } {
  return packFolder(packageDir(name), vendorDir, vendorName(name));
}

/** `npm pack` of any package folder into vendorDir/<folderName>.tgz, unpacked into vendorDir/<folderName>/. */
export function packFolder(
  source: string,
  vendorDir: string,
  folderName: string,
): { tarball: string; folder: string } {
  mkdirSync(vendorDir, { recursive: true });
  const packed = spawnSync(
    'npm',
    ['pack', source, '--pack-destination', vendorDir, '--json', '--silent', '--ignore-scripts'],
    {
      encoding: 'utf8',
    },
  );
  if (packed.status !== 0) {
    throw new CliError(
      `npm pack ${source} failed: ${(packed.stderr || packed.stdout || String(packed.error)).trim()}`,
      'check that npm works (npm --version) and try again',
    );
  }
  const info = JSON.parse(packed.stdout) as Array<{ filename: string }>;
  const file = info[0]!.filename.replace(/^.*\//, '');
  // Stable names, so package.json and the lock file don't change with every version.
  const tarball = join(vendorDir, `${folderName}.tgz`);
  renameSync(join(vendorDir, file), tarball);
  const folder = join(vendorDir, folderName);
  rmSync(folder, { recursive: true, force: true });
  mkdirSync(folder, { recursive: true });
  const untar = spawnSync('tar', ['xzf', tarball, '-C', folder, '--strip-components=1'], {
    encoding: 'utf8',
  });
  if (untar.status !== 0) {
    throw new CliError(`cannot unpack ${tarball}: ${untar.stderr.trim()}`, 'check that tar is installed');
  }
  // As installed from a registry: without devDependencies (npm would install those of a linked folder).
  const manifest = join(folder, 'package.json');
  const pkg = JSON.parse(readFileSync(manifest, 'utf8')) as Record<string, unknown>;
  delete pkg.devDependencies;
  writeFileSync(manifest, `${JSON.stringify(pkg, null, 2)}\n`);
  return { tarball, folder };
}
