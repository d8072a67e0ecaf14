/**
 * An implementation under test as a child process: its CPU seconds (utime + stime from /proc/<pid>/stat)
 * and peak RSS (VmHWM from /proc/<pid>/status), sampled while it runs so a late crash loses nothing.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync } from 'node:fs';

const CLK_TCK = 100; // sysconf(_SC_CLK_TCK) on Linux x86-64

export interface ProcSample {
  cpuSeconds: number;
  rssBytes: number;
  hwmBytes: number;
}

export function readProc(pid: number): ProcSample | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (key: string) =>
      Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024;
    return { cpuSeconds: (utime + stime) / CLK_TCK, rssBytes: kb('VmRSS'), hwmBytes: kb('VmHWM') };
  } catch {
    return undefined;
  }
}

/**
 * CPU seconds of a process's threads by thread name (/proc/<pid>/task/<tid>/stat): the main thread apart
 * from, for Node, V8's workers (garbage collection, the optimizing compiler) and libuv's.
 */
export function readThreadCpu(pid: number): Map<string, number> {
  const byName = new Map<string, number>();
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        const name =
          String(tid) === String(pid) ? 'main' : stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        const cpu = (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
        byName.set(name, (byName.get(name) ?? 0) + cpu);
      } catch {
        // the thread ended meanwhile
      }
    }
  } catch {
    // the process ended
  }
  return byName;
}

/**
 * Resident memory of a process by what it maps (/proc/<pid>/smaps), in bytes, largest first: each file
 * by its base name, `[heap]` (malloc's main arena), `[stack]`, and `[anon]` for the rest (V8's heap,
 * malloc's other arenas, thread stacks). Where an operator's RSS goes, beyond V8's own heap statistics.
 */
export function readRssByMapping(pid: number): [string, number][] {
  const byName = new Map<string, number>();
  let smaps: string;
  try {
    smaps = readFileSync(`/proc/${pid}/smaps`, 'utf8');
  } catch {
    return [];
  }
  let name = '[anon]';
  for (const line of smaps.split('\n')) {
    const header = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (header) {
      const path = header[1] ?? '';
      name = path === '' ? '[anon]' : path.startsWith('[') ? path : path.slice(path.lastIndexOf('/') + 1);
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) byName.set(name, (byName.get(name) ?? 0) + Number(rss[1]) * 1024);
  }
  return [...byName].sort((a, b) => b[1] - a[1]);
}

export class MeasuredProcess {
  readonly child: ChildProcess;
  readonly name: string;
  readonly logFile: string;
  readonly exited: Promise<number | null>;
  private last: ProcSample = { cpuSeconds: 0, rssBytes: 0, hwmBytes: 0 };
  private timer: NodeJS.Timeout;
  private exitCode: number | null | undefined;

  constructor(name: string, command: string, args: string[], logFile: string, env?: NodeJS.ProcessEnv) {
    this.name = name;
    this.logFile = logFile;
    const fd = openSync(logFile, 'a');
    try {
      this.child = spawn(command, args, { stdio: ['ignore', fd, fd], env: env ?? process.env });
    } finally {
      closeSync(fd);
    }
    this.exited = new Promise((resolve) => {
      this.child.on('exit', (code) => {
        this.exitCode = code;
        clearInterval(this.timer);
        resolve(code);
      });
    });
    this.timer = setInterval(() => this.sample(), 200);
    this.timer.unref();
    const kill = () => this.child.kill('SIGKILL');
    process.once('exit', kill);
    void this.exited.then(() => process.off('exit', kill));
  }

  get running(): boolean {
    return this.exitCode === undefined;
  }

  /** Current CPU seconds and peak RSS (the last sample if the process is gone). */
  sample(): ProcSample {
    if (this.child.pid !== undefined && this.running) {
      const s = readProc(this.child.pid);
      if (s) this.last = s;
    }
    return this.last;
  }

  logTail(lines = 30): string {
    try {
      return readFileSync(this.logFile, 'utf8').split('\n').slice(-lines).join('\n');
    } catch {
      return '';
    }
  }

  /** SIGTERM, then SIGKILL after the grace period. Returns the final sample. */
  async stop(graceMs = 5000): Promise<ProcSample> {
    const final = this.sample();
    if (!this.running) return final;
    this.child.kill('SIGTERM');
    const t = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(t);
    return final;
  }
}
