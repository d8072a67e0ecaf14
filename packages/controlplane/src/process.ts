/**
 * Child processes of a control plane: started with their output in a log file, stopped with SIGTERM
 * then SIGKILL, and all killed when this process exits or gets SIGINT/SIGTERM, so nothing outlives us.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';

const live = new Set<ManagedProcess>();
let hooksInstalled = false;

function installExitHooks() {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.on('exit', () => {
    for (const p of live) p.killNow();
  });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(signal, () => {
      // Someone else handles this signal (a manager's graceful shutdown, a supervisor): let them finish
      // with the control plane still up; the 'exit' hook above still kills whatever is left.
      if (process.listenerCount(signal) > 1) return;
      for (const p of live) p.killNow();
      for (const fn of signalCleanups) {
        try {
          fn();
        } catch {
          // Best effort: we are exiting anyway.
        }
      }
      process.exit(signal === 'SIGINT' ? 130 : 143);
    });
  }
}

const signalCleanups = new Set<() => void>();

/** Synchronous cleanup (temp directories) to run on SIGINT/SIGTERM/exit. Returns an unregister function. */
export function onProcessExit(fn: () => void): () => void {
  installExitHooks();
  signalCleanups.add(fn);
  const exitHook = () => fn();
  process.on('exit', exitHook);
  return () => {
    signalCleanups.delete(fn);
    process.off('exit', exitHook);
  };
}

export class ComponentExitedError extends Error {
  constructor(name: string, code: number | null, logTail: string) {
    super(`${name} exited unexpectedly (code ${code}). Last lines of its log:\n${logTail}`);
    this.name = 'ComponentExitedError';
  }
}

export class ManagedProcess {
  readonly name: string;
  readonly logFile: string;
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  private stopping = false;
  private exitCode: number | null | undefined;

  constructor(name: string, command: string, args: string[], logFile: string, env?: NodeJS.ProcessEnv) {
    installExitHooks();
    this.name = name;
    this.logFile = logFile;
    const fd = openSync(logFile, 'a');
    try {
      this.child = spawn(command, args, {
        stdio: ['ignore', fd, fd],
        env: env ?? process.env,
        detached: false,
      });
    } finally {
      closeSync(fd);
    }
    live.add(this);
    this.exited = new Promise((resolve) => {
      this.child.on('exit', (code) => {
        this.exitCode = code;
        live.delete(this);
        resolve(code);
      });
      this.child.on('error', () => {
        this.exitCode = -1;
        live.delete(this);
        resolve(-1);
      });
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get running(): boolean {
    return this.exitCode === undefined;
  }

  /** Throws a ComponentExitedError if the process died without being asked to. */
  assertRunning(): void {
    if (!this.running && !this.stopping)
      throw new ComponentExitedError(this.name, this.exitCode ?? null, this.logTail());
  }

  logTail(lines = 20): string {
    try {
      return readFileSync(this.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
    } catch {
      return '(no log)';
    }
  }

  /** SIGTERM, then SIGKILL after `graceMs`. Resolves once the process is gone. */
  async stop(graceMs = 10_000): Promise<void> {
    this.stopping = true;
    if (!this.running) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  killNow(): void {
    this.stopping = true;
    if (this.running) this.child.kill('SIGKILL');
  }
}
