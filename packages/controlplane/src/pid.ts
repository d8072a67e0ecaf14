import { readFileSync } from 'node:fs';

/** Whether a process with this pid runs (another user's counts; a zombie, killed but not reaped, does not). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  // A killed supervisor is re-parented; until its new parent reaps it, it is a zombie: dead.
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true;
  }
}
