import { mkdirSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isAlive } from './pid.ts';

/**
 * Ports for local components (etcd, kube-apiserver, controllers, test servers).
 *
 * A port the kernel picks (listen on 0, close, hand the number on) is free only for a moment: until the
 * component binds it, any outgoing connection on the machine may take it as its source port, and another
 * process may be handed the same number. Both happened in CI ("bind: address already in use" from a
 * kube-controller-manager while two test files ran at once). So a port is chosen here
 * - outside the kernel's ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`), where source ports
 *   of outgoing connections come from, and below the NodePort range (30000-32767);
 * - reserved across processes: a file per port under `<tmp>/opkit-ports`, created exclusively and
 *   holding the owner's pid. A file whose pid is no longer alive is stale and reclaimed;
 * - bound once to check that nothing outside opkit holds it.
 * A process's reservations last until it exits (they are removed then, or reclaimed later if it was
 * killed): there are thousands of ports in the range and a process starts a handful of clusters.
 */
export interface PortRange {
  /** Lowest port handed out. */
  min: number;
  /** Highest port handed out. */
  max: number;
}

export interface PortAllocatorOptions {
  /** Where reservations live (default `<tmp>/opkit-ports`). */
  dir?: string;
  /** Ports to choose from (default: 20000 up to 29999 or the port below the ephemeral range). */
  range?: PortRange;
  /** Random picks before giving up on the range. */
  attempts?: number;
}

const NODE_PORTS_START = 30000;
const DEFAULT_MIN = 20000;
/** A reservation that still holds no pid after this long was left by a process killed while writing it. */
const STALE_WITHOUT_PID_MS = 10_000;

/** The kernel's ephemeral range, or undefined where it cannot be read (not Linux). */
export function ephemeralPortRange(): PortRange | undefined {
  try {
    const [min, max] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/);
    return { min: Number(min), max: Number(max) };
  } catch {
    return undefined;
  }
}

function defaultRange(): PortRange | undefined {
  const ephemeral = ephemeralPortRange();
  const max = Math.min(NODE_PORTS_START, ephemeral?.min ?? NODE_PORTS_START) - 1;
  return max - DEFAULT_MIN >= 1000 ? { min: DEFAULT_MIN, max } : undefined;
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A kernel-chosen port: the fallback where no range outside the ephemeral one exists. */
function kernelPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        address && typeof address === 'object' ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

export class PortAllocator {
  readonly dir: string;
  readonly range: PortRange | undefined;
  readonly #attempts: number;
  readonly #held = new Set<number>();
  #prepared = false;

  constructor(opts: PortAllocatorOptions = {}) {
    this.dir = opts.dir ?? join(tmpdir(), 'opkit-ports');
    this.range = opts.range ?? defaultRange();
    this.#attempts = opts.attempts ?? 200;
  }

  /** A port on 127.0.0.1 that no other opkit process holds and nothing listens on; held until exit. */
  async take(): Promise<number> {
    const range = this.range;
    if (!range) return kernelPort();
    this.#prepare();
    for (let i = 0; i < this.#attempts; i++) {
      const port = range.min + Math.floor(Math.random() * (range.max - range.min + 1));
      if (!this.#reserve(port)) continue;
      if (await canListen(port)) return port;
      this.release(port);
    }
    throw new Error(
      `no free port in ${range.min}-${range.max} after ${this.#attempts} tries: ` +
        `remove stale reservations in ${this.dir} or stop what listens there`,
    );
  }

  /** Gives a port back before the process exits. */
  release(port: number): void {
    if (!this.#held.delete(port)) return;
    try {
      if (readFileSync(this.#file(port), 'utf8') === String(process.pid)) unlinkSync(this.#file(port));
    } catch {
      // Already gone.
    }
  }

  #file(port: number): string {
    return join(this.dir, String(port));
  }

  #reserve(port: number): boolean {
    const file = this.#file(port);
    const mine = String(process.pid);
    try {
      writeFileSync(file, mine, { flag: 'wx' });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      let owner: number;
      let ageMs: number;
      try {
        owner = Number(readFileSync(file, 'utf8'));
        ageMs = Date.now() - statSync(file).mtimeMs;
      } catch {
        return false; // Released meanwhile: another pick will do.
      }
      // No pid yet: its owner is between creating the file and writing to it, unless that was long ago.
      const valid = Number.isInteger(owner) && owner > 0;
      if (!valid && ageMs < STALE_WITHOUT_PID_MS) return false;
      if (owner === process.pid || (valid && isAlive(owner))) return false;
      // Stale: its owner died without removing it. Replace it, then make sure no other reclaimer won.
      try {
        unlinkSync(file);
        writeFileSync(file, mine, { flag: 'wx' });
        if (readFileSync(file, 'utf8') !== mine) return false;
      } catch {
        return false;
      }
    }
    this.#held.add(port);
    return true;
  }

  /** Once per allocator: the reservations' directory, and their removal when this process exits. */
  #prepare(): void {
    if (this.#prepared) return;
    this.#prepared = true;
    mkdirSync(this.dir, { recursive: true });
    process.once('exit', () => {
      for (const port of [...this.#held]) this.release(port);
    });
  }
}

const shared = new PortAllocator();

/**
 * A free TCP port on 127.0.0.1 for a local component: outside the ephemeral range and reserved against
 * other opkit processes until this one exits (see PortAllocator).
 */
export function freePort(): Promise<number> {
  return shared.take();
}
