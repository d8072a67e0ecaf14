/** Writing scaffolded files, with a line per file. */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Io } from './io.ts';

export interface FileToWrite {
  /** Relative to the project, with '/'. */
  path: string;
  content: string;
  /** Make it executable. */
  executable?: boolean;
}

export function writeFiles(dir: string, files: readonly FileToWrite[], io: Io): void {
  for (const f of files) {
    const target = join(dir, f.path);
    const existed = existsSync(target);
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, f.content, f.executable ? { mode: 0o755 } : {});
    io.err(`  ${existed ? 'updated' : 'created'} ${f.path}`);
  }
}
