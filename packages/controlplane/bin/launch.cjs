/**
 * Runs a TypeScript entry point with a Node.js that can (>= 24: type stripping on by default), from whatever Node
 * started the bin. Plain CommonJS on purpose: this file must load on old Node versions too, to say what to do.
 *   - the running Node if it is new enough: the entry is imported in this process;
 *   - else the first Node >= 24 among the `node` npm package of the enclosing projects (node_modules/.bin/node,
 *     from the bin's folder and from the current folder upwards) and the `node`s on PATH: the entry runs in a
 *     child process with the same arguments, stdio, exit code and signals;
 *   - else it prints what to install and exits with 1.
 */
'use strict';
const { spawn, spawnSync } = require('node:child_process');
const { accessSync, constants, realpathSync } = require('node:fs');
const { delimiter, dirname, join } = require('node:path');
const { pathToFileURL } = require('node:url');

const MIN_MAJOR = 24;

/** The major version of a version string such as "24.9.0" or "v20.20.2", or 0. */
function majorOf(version) {
  const m = /^v?(\d+)\./.exec(String(version).trim());
  return m ? Number(m[1]) : 0;
}

function executable(path) {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function real(path) {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

/** Candidate Node binaries, in order of preference, each once. */
function candidates(startDirs, pathEnv) {
  const seen = new Set();
  const out = [];
  const add = (path) => {
    if (!executable(path)) return;
    const key = real(path);
    if (seen.has(key)) return;
    seen.add(key);
    out.push(path);
  };
  for (const start of startDirs) {
    for (let dir = start; ; dir = dirname(dir)) {
      add(join(dir, 'node_modules', 'node', 'bin', 'node'));
      add(join(dir, 'node_modules', '.bin', 'node'));
      if (dirname(dir) === dir) break;
    }
  }
  for (const dir of (pathEnv || '').split(delimiter)) if (dir) add(join(dir, 'node'));
  return out;
}

/** The version a Node binary reports, or '' if it does not run. */
function versionOf(path) {
  const r = spawnSync(path, ['--version'], { encoding: 'utf8', timeout: 30000 });
  return r.status === 0 ? String(r.stdout).trim() : '';
}

/** The first Node >= MIN_MAJOR: { path, version } or undefined. */
function findNode(startDirs, pathEnv) {
  for (const path of candidates(startDirs, pathEnv)) {
    const version = versionOf(path);
    if (majorOf(version) >= MIN_MAJOR) return { path, version };
  }
  return undefined;
}

function runChild(nodePath, entry, args) {
  const child = spawn(nodePath, [entry, ...args], { stdio: 'inherit' });
  // Ctrl-C and a terminal hang-up reach the whole foreground process group, the child included: forwarding them
  // too would make it see two (the operator manager exits at once on a second one). SIGTERM always is forwarded.
  const fromTerminal = process.stdin.isTTY === true;
  const forwarded = fromTerminal ? ['SIGTERM'] : ['SIGTERM', 'SIGINT', 'SIGHUP'];
  const handlers = new Map();
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
    const handler = forwarded.includes(signal) ? () => child.kill(signal) : () => {};
    handlers.set(signal, handler);
    process.on(signal, handler);
  }
  child.on('error', (err) => {
    process.stderr.write(`could not run ${nodePath}: ${err.message}\n`);
    process.exit(1);
  });
  child.on('exit', (code, signal) => {
    for (const [s, handler] of handlers) process.off(s, handler);
    if (signal) process.kill(process.pid, signal);
    else process.exit(code === null ? 1 : code);
  });
}

/**
 * Runs `entry` (an absolute path to a .ts file) as the program `name` with process.argv's arguments.
 * `env` and `cwd` are parameters for tests; they default to the process's.
 */
function launch(name, entry, options) {
  const opts = options || {};
  const env = opts.env || process.env;
  const cwd = opts.cwd || process.cwd();
  if (majorOf(process.versions.node) >= MIN_MAJOR) {
    import(pathToFileURL(entry).href).catch((err) => {
      process.stderr.write(`${err?.stack ?? err}\n`);
      process.exitCode = 1;
    });
    return;
  }
  const found = findNode([dirname(real(entry)), cwd], env.PATH);
  if (found) {
    runChild(found.path, entry, process.argv.slice(2));
    return;
  }
  process.stderr.write(
    `${name} needs Node.js >= ${MIN_MAJOR} (it runs its TypeScript directly); this is Node ${process.version} ` +
      `(${process.execPath}) and no Node >= ${MIN_MAJOR} was found in node_modules/.bin or on PATH.\n` +
      'Do one of:\n' +
      '  npm install            in the project: its devDependency "node" puts Node 24 into node_modules/.bin\n' +
      `  npx -p node@${MIN_MAJOR} ${name} ...   run it once with Node ${MIN_MAJOR} from npm\n` +
      `  nvm install ${MIN_MAJOR}         or install Node ${MIN_MAJOR} (https://nodejs.org) and put it first on PATH\n`,
  );
  process.exit(1);
}

module.exports = { launch, findNode, majorOf, MIN_MAJOR };
