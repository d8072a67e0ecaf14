/**
 * The opkit-warm-compile-cache command (a Dockerfile's RUN step; see compile-cache.ts):
 *
 *   opkit-warm-compile-cache [--cache-dir <dir>] [--uid <uid>] [--timeout <s>] -- <node flags> <entry>
 *
 * What follows `--` is what follows `node` in the image's ENTRYPOINT, so that the cache's key matches it.
 */
import { parseArgs } from 'node:util';
import { CompileCacheError, warmCompileCache } from './compile-cache.ts';

export const USAGE = `Usage: opkit-warm-compile-cache [--cache-dir <dir>] [--uid <uid>] [--timeout <s>] -- <node flags> <entry>

Warms Node's compile cache for an operator's image: imports <entry> (which must start nothing when
imported: guard the start with \`if (import.meta.main)\`) with the compile cache on, with the ENTRYPOINT's
Node flags, and leaves the cache readable by the image's USER. After \`--\`: the ENTRYPOINT's arguments
after \`node\`. Run it with the image's Node (the cache is keyed on Node's version).

Flags:
  --cache-dir <dir>   the cache directory, the image's NODE_COMPILE_CACHE (default .node-compile-cache)
  --uid <uid>         the uid the image runs as, its USER (default: this process's uid)
  --timeout <s>       how long importing the entry may take (default 120)

Example (Dockerfile, WORKDIR /app; an npm command, so opkit's builder follows it too):
  ENV NODE_COMPILE_CACHE=/app/.node-compile-cache
  ENV NODE_COMPILE_CACHE_PORTABLE=1
  RUN npm exec -- opkit-warm-compile-cache --uid 65532 -- --max-semi-space-size=4 src/main.ts
  USER 65532:65532
  ENTRYPOINT ["node", "--max-semi-space-size=4", "src/main.ts"]`;

export interface CommandIo {
  out(line: string): void;
  err(line: string): void;
}

/** Runs the command; returns its exit code (0 warmed, 1 failed, 2 usage). */
export function runWarmCommand(argv: readonly string[], io: CommandIo, cwd = process.cwd()): number {
  const dash = argv.indexOf('--');
  let values: { 'cache-dir'?: string; uid?: string; timeout?: string; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: dash < 0 ? [...argv] : argv.slice(0, dash),
      options: {
        'cache-dir': { type: 'string' },
        uid: { type: 'string' },
        timeout: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    const message = (err as Error).message;
    return usage(
      io,
      /Unexpected argument/.test(message) ? `${message}: the node flags and the entry go after --` : message,
    );
  }
  if (values.help) {
    io.out(USAGE);
    return 0;
  }
  const rest = dash < 0 ? [] : argv.slice(dash + 1);
  const entry = rest.at(-1);
  if (entry === undefined || entry.startsWith('-'))
    return usage(io, 'the entry is missing: after --, the node flags and the file the ENTRYPOINT runs');
  const uid = values.uid === undefined ? undefined : Number(values.uid);
  if (uid !== undefined && !(Number.isInteger(uid) && uid >= 0))
    return usage(io, `--uid must be a non-negative integer (the image's USER), not "${values.uid}"`);
  const timeout = values.timeout === undefined ? 120 : Number(values.timeout);
  if (!(timeout > 0))
    return usage(io, `--timeout must be a positive number of seconds, not "${values.timeout}"`);
  const started = Date.now();
  try {
    const warmed = warmCompileCache({
      entry,
      nodeFlags: rest.slice(0, -1),
      cacheDir: values['cache-dir'] ?? '.node-compile-cache',
      uid,
      cwd,
      timeoutMs: timeout * 1000,
    });
    io.out(
      `warmed Node's compile cache for ${entry}: ${warmed.entries} entries in ${warmed.dir} (uid ${warmed.uid}, ${((Date.now() - started) / 1000).toFixed(1)} s)`,
    );
    return 0;
  } catch (err) {
    if (!(err instanceof CompileCacheError)) throw err;
    io.err(`error: ${err.message}`);
    io.err(`next: ${err.hint}`);
    return 1;
  }
}

function usage(io: CommandIo, message: string): number {
  io.err(`error: ${message}`);
  io.err(USAGE);
  return 2;
}
