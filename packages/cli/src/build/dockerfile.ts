/**
 * The subset of the Dockerfile language opkit's own builder follows: stages (FROM ... AS), WORKDIR, ENV,
 * COPY (--from, --chown), RUN (npm commands only: they run on the host), USER, ENTRYPOINT, CMD, EXPOSE,
 * STOPSIGNAL; LABEL and ARG are accepted and have no effect. Pure: text in, stages out.
 */
import { CliError } from '../errors.ts';

export type Instruction =
  | { op: 'WORKDIR'; path: string }
  | { op: 'ENV'; pairs: Array<[string, string]> }
  | { op: 'COPY'; from?: string; sources: string[]; dest: string }
  | { op: 'RUN'; command: string }
  | { op: 'USER'; user: string }
  | { op: 'ENTRYPOINT'; argv: string[] }
  | { op: 'CMD'; argv: string[] }
  | { op: 'EXPOSE'; ports: string[] }
  | { op: 'STOPSIGNAL'; signal: string };

export interface Stage {
  base: string;
  name?: string;
  steps: Instruction[];
}

export class DockerfileError extends CliError {
  constructor(line: number, message: string) {
    super(
      `Dockerfile line ${line}: ${message}`,
      'opkit builds only what it can follow without a container engine; use --engine docker|podman|buildah for the rest',
    );
    this.name = 'DockerfileError';
  }
}

/** The logical lines (continuations joined, comments dropped) with their first physical line number. */
function logicalLines(text: string): Array<{ line: number; text: string }> {
  const out: Array<{ line: number; text: string }> = [];
  let pending: { line: number; text: string } | undefined;
  text.split('\n').forEach((raw, i) => {
    const trimmed = raw.trim();
    if (!pending && (trimmed === '' || trimmed.startsWith('#'))) return;
    if (pending && trimmed.startsWith('#')) return;
    const continued = trimmed.endsWith('\\');
    const part = continued ? trimmed.slice(0, -1).trim() : trimmed;
    pending = pending ? { line: pending.line, text: `${pending.text} ${part}` } : { line: i + 1, text: part };
    if (!continued) {
      out.push(pending);
      pending = undefined;
    }
  });
  if (pending) out.push(pending);
  return out;
}

/** Exec form (a JSON array) or shell form (run by /bin/sh -c). */
function argv(rest: string, line: number): string[] {
  if (rest.startsWith('[')) {
    try {
      const parsed = JSON.parse(rest) as unknown;
      if (Array.isArray(parsed) && parsed.every((a) => typeof a === 'string')) return parsed;
    } catch {
      // falls through to the error
    }
    throw new DockerfileError(line, `not a JSON array of strings: ${rest}`);
  }
  return ['/bin/sh', '-c', rest];
}

function envPairs(rest: string, line: number): Array<[string, string]> {
  if (!rest.includes('=')) {
    const [key, ...value] = rest.split(/\s+/);
    return [[key!, value.join(' ')]];
  }
  const pairs: Array<[string, string]> = [];
  for (const m of rest.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|\S*)/g)) {
    const v = m[2]!;
    pairs.push([m[1]!, v.startsWith('"') ? (JSON.parse(v) as string) : v]);
  }
  if (pairs.length === 0) throw new DockerfileError(line, `cannot read ENV ${rest}`);
  return pairs;
}

export function parseDockerfile(text: string): Stage[] {
  const stages: Stage[] = [];
  for (const { line, text: l } of logicalLines(text)) {
    const m = /^(\S+)\s*(.*)$/.exec(l)!;
    const op = m[1]!.toUpperCase();
    const rest = m[2]!.trim();
    if (op === 'FROM') {
      const from = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(rest);
      if (!from) throw new DockerfileError(line, `cannot read FROM ${rest}`);
      stages.push(from[2] ? { base: from[1]!, name: from[2], steps: [] } : { base: from[1]!, steps: [] });
      continue;
    }
    const stage = stages.at(-1);
    if (!stage) {
      if (op === 'ARG') continue;
      throw new DockerfileError(line, `${op} before the first FROM`);
    }
    switch (op) {
      case 'WORKDIR':
        stage.steps.push({ op, path: rest });
        break;
      case 'ENV':
        stage.steps.push({ op, pairs: envPairs(rest, line) });
        break;
      case 'COPY': {
        const words = rest.split(/\s+/);
        let from: string | undefined;
        while (words[0]?.startsWith('--')) {
          const flag = words.shift()!;
          if (flag.startsWith('--from=')) from = flag.slice('--from='.length);
          else if (!flag.startsWith('--chown=') && !flag.startsWith('--chmod='))
            throw new DockerfileError(line, `COPY ${flag} is not supported`);
        }
        if (words.length < 2) throw new DockerfileError(line, 'COPY needs a source and a destination');
        const dest = words.pop()!;
        stage.steps.push(from ? { op, from, sources: words, dest } : { op, sources: words, dest });
        break;
      }
      case 'RUN':
        stage.steps.push({ op, command: rest });
        break;
      case 'USER':
        stage.steps.push({ op, user: rest });
        break;
      case 'ENTRYPOINT':
      case 'CMD':
        stage.steps.push({ op, argv: argv(rest, line) });
        break;
      case 'EXPOSE':
        stage.steps.push({ op, ports: rest.split(/\s+/).map((p) => (p.includes('/') ? p : `${p}/tcp`)) });
        break;
      case 'STOPSIGNAL':
        stage.steps.push({ op, signal: rest });
        break;
      case 'LABEL':
      case 'ARG':
        break;
      default:
        throw new DockerfileError(line, `${op} is not supported by opkit's builder`);
    }
  }
  if (stages.length === 0) throw new DockerfileError(1, 'no FROM: not a Dockerfile');
  return stages;
}

/** The opkit.local image standing in for an official Node 24 base, or undefined. */
export function localBaseFor(base: string, nodeImage: string): string | undefined {
  return /^(?:docker\.io\/)?(?:library\/)?node:24(?:[-.][\w.-]*)?$/.test(base) ? nodeImage : undefined;
}

/** The npm commands of a RUN (`npm ... && npm ...`), or undefined when it runs anything else. */
export function npmCommands(command: string): string[][] | undefined {
  const parts = command.split('&&').map((p) => p.trim().split(/\s+/));
  return parts.every((p) => p[0] === 'npm') ? parts.map((p) => p.slice(1)) : undefined;
}
