import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { isAlive } from '../pid.ts';

/**
 * A cross-process lock: a directory created atomically with mkdir, holding the owner's pid.
 * A lock whose owner died is taken over, so a killed install never blocks the next one.
 */
export async function withLock<T>(
  path: string,
  onWait: (ownerPid: number) => void,
  fn: () => Promise<T>,
): Promise<T> {
  let reported = false;
  for (;;) {
    try {
      mkdirSync(path);
      writeFileSync(`${path}/pid`, String(process.pid));
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      let owner = 0;
      try {
        owner = Number.parseInt(readFileSync(`${path}/pid`, 'utf8'), 10);
      } catch {
        // The owner is between mkdir and writing its pid; give it a moment.
      }
      if (owner > 0 && !isAlive(owner)) {
        rmSync(path, { recursive: true, force: true });
        continue;
      }
      if (!reported && owner > 0) {
        onWait(owner);
        reported = true;
      }
      await sleep(500);
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(path, { recursive: true, force: true });
  }
}
