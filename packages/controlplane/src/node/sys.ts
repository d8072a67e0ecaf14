/** Small synchronous wrappers over the host tools a node needs (ip, nsenter, umount, /proc). */
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';

export class HostCommandError extends Error {
  constructor(cmd: string, args: string[], output: string) {
    super(`${cmd} ${args.join(' ')} failed: ${output.trim()}`);
    this.name = 'HostCommandError';
  }
}

/** Runs a command; throws with its output unless `allowFail`. Returns stdout. */
export function sh(cmd: string, args: string[], opts: { allowFail?: boolean; input?: string } = {}): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', input: opts.input, timeout: 60_000 });
  if ((r.status !== 0 || r.error) && !opts.allowFail)
    throw new HostCommandError(cmd, args, `${r.stderr ?? ''}${r.error?.message ?? ''}`);
  return r.stdout ?? '';
}

/** Runs a command without blocking the event loop; rejects with its output when it fails. Returns stdout. */
export function run(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { encoding: 'utf8', timeout: 60_000 }, (err, stdout, stderr) => {
      if (err) reject(new HostCommandError(cmd, args, `${stderr}${err.message}`));
      else resolve(stdout);
    });
  });
}

export const netnsPath = (name: string) => `/run/netns/${name}`;

/** Runs a command inside a named network namespace (only the network: mounts and PIDs stay the host's). */
export function inNetns(
  netns: string,
  cmd: string,
  args: string[],
  opts: { allowFail?: boolean } = {},
): string {
  return sh('nsenter', [`--net=${netnsPath(netns)}`, '--', cmd, ...args], opts);
}

export function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Mount points at or below `prefix`, deepest first (from /proc/self/mountinfo). */
export function mountsUnder(prefix: string): string[] {
  const unoctal = (s: string) =>
    s.replace(/\\(\d{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)));
  const base = prefix.replace(/\/+$/, '');
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => unoctal(l.split(' ')[4] ?? ''))
    .filter((m) => m === base || m.startsWith(`${base}/`))
    .sort((a, b) => b.length - a.length);
}

export function unmountAll(prefix: string): void {
  for (let round = 0; round < 5; round++) {
    const mounts = mountsUnder(prefix);
    if (!mounts.length) return;
    for (const m of mounts) sh('umount', ['-l', m], { allowFail: true });
  }
}

export interface ProcInfo {
  pid: number;
  cmdline: string;
  cgroup: string;
}

export function listProcesses(): ProcInfo[] {
  const out: ProcInfo[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
      const cgroup = readFileSync(`/proc/${pid}/cgroup`, 'utf8');
      out.push({ pid, cmdline, cgroup });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** SIGKILLs every process matching `match` until none is left (bounded: ~10 s). Returns how many were killed. */
export function killMatching(match: (p: ProcInfo) => boolean): number {
  let killed = 0;
  for (let round = 0; round < 100; round++) {
    const victims = listProcesses().filter(match);
    if (!victims.length) return killed;
    for (const v of victims) {
      try {
        process.kill(v.pid, 'SIGKILL');
        killed++;
      } catch {
        // already gone
      }
    }
    sleepSync(100);
  }
  return killed;
}

export function linkExists(name: string): boolean {
  return existsSync(`/sys/class/net/${name}`);
}

/** Names of the network namespaces in /run/netns. */
export function netnsNames(): string[] {
  return existsSync('/run/netns') ? readdirSync('/run/netns') : [];
}

export function safeReadlink(p: string): string | undefined {
  try {
    return readlinkSync(p);
  } catch {
    return undefined;
  }
}
