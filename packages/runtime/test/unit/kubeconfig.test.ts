/**
 * The kubeconfig loader and the native credentials of loadConfig; exec plugins and proxies go through
 * @kubernetes/client-node, which the common configurations must not load.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ConfigError, loadConfig, type RequestAuth } from '../../src/client/config.ts';
import { mergeKubeconfigs, readKubeconfig } from '../../src/client/kubeconfig.ts';

let dir: string;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'opkit-kubeconfig-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

const b64 = (s: string) => Buffer.from(s).toString('base64');

/** Writes a one-context kubeconfig (cluster and user given as YAML lines) to `dir/<path>`. */
function kubeconfig(
  path: string,
  cluster: string[],
  user: string[],
  extra: { context?: string; namespace?: string } = {},
): string {
  const file = join(dir, path);
  mkdirSync(join(file, '..'), { recursive: true });
  const ctx = extra.context ?? 'ctx';
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      `- name: ${ctx}-cluster`,
      '  cluster:',
      ...cluster.map((l) => `    ${l}`),
      'users:',
      `- name: ${ctx}-user`,
      '  user:',
      ...(user.length > 0 ? user.map((l) => `    ${l}`) : ['    {}']),
      'contexts:',
      `- name: ${ctx}`,
      '  context:',
      `    cluster: ${ctx}-cluster`,
      `    user: ${ctx}-user`,
      ...(extra.namespace ? [`    namespace: ${extra.namespace}`] : []),
      `current-context: ${ctx}`,
      '',
    ].join('\n'),
  );
  return file;
}

const auth = (file: string): Promise<RequestAuth> => loadConfig({ kubeconfig: file, env: {} }).authenticate();

/** Asserts that `fn` throws a ConfigError whose message matches every pattern. */
function throwsConfigError(fn: () => unknown, ...patterns: RegExp[]): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof ConfigError, `ConfigError expected, got ${String(err)}`);
    for (const p of patterns) assert.match(err.message, p);
    return true;
  });
}

describe('kubeconfig credentials', () => {
  test('token-file and tokenFile (kubectl) are both read, trimmed; a token file wins over a token', async () => {
    writeFileSync(join(dir, 'token-a'), 'from-token-file\n');
    writeFileSync(join(dir, 'token-b'), 'from-tokenFile');
    const server = ['server: https://10.0.0.1:6443'];
    const dash = kubeconfig('tf-dash.yaml', server, [`token-file: ${join(dir, 'token-a')}`]);
    const camel = kubeconfig('tf-camel.yaml', server, [
      `tokenFile: ${join(dir, 'token-b')}`,
      'token: static',
    ]);
    assert.equal((await auth(dash)).headers.Authorization, 'Bearer from-token-file');
    assert.equal((await auth(camel)).headers.Authorization, 'Bearer from-tokenFile');
  });

  test('relative paths are resolved against the kubeconfig file directory', async () => {
    const sub = join(dir, 'rel');
    mkdirSync(join(sub, 'certs'), { recursive: true });
    writeFileSync(join(sub, 'ca.crt'), 'CA PEM');
    writeFileSync(join(sub, 'certs', 'client.crt'), 'CERT PEM');
    writeFileSync(join(sub, 'certs', 'client.key'), 'KEY PEM');
    writeFileSync(join(sub, 'token'), 'relative-token');
    const file = kubeconfig(
      'rel/config',
      ['server: https://10.0.0.1:6443', 'certificate-authority: ca.crt'],
      ['client-certificate: certs/client.crt', 'client-key: ./certs/client.key', 'token-file: token'],
    );
    const a = await auth(file);
    assert.equal(String(a.ca), 'CA PEM');
    assert.equal(String(a.cert), 'CERT PEM');
    assert.equal(String(a.key), 'KEY PEM');
    assert.equal(a.headers.Authorization, 'Bearer relative-token');
    assert.equal(a.rejectUnauthorized, undefined, 'verification stays on');
    assert.equal(a.servername, undefined);
  });

  test('*-data fields are base64; insecure-skip-tls-verify and tls-server-name', async () => {
    const file = kubeconfig(
      'data.yaml',
      [
        'server: https://10.0.0.1:6443',
        `certificate-authority-data: ${b64('CA DATA')}`,
        'insecure-skip-tls-verify: true',
        'tls-server-name: api.internal',
      ],
      [`client-certificate-data: ${b64('CERT DATA')}`, `client-key-data: ${b64('KEY DATA')}`],
    );
    const a = await auth(file);
    assert.ok(Buffer.isBuffer(a.ca));
    assert.equal(String(a.ca), 'CA DATA');
    assert.equal(String(a.cert), 'CERT DATA');
    assert.equal(String(a.key), 'KEY DATA');
    assert.equal(a.rejectUnauthorized, false);
    assert.equal(a.servername, 'api.internal');
    assert.equal(a.headers.Authorization, undefined);
  });

  test('basic auth (a numeric password too) and impersonation', async () => {
    const file = kubeconfig(
      'basic.yaml',
      ['server: https://10.0.0.1:6443'],
      ['username: admin', 'password: 1234', 'as: someone'],
    );
    const a = await auth(file);
    assert.equal(a.auth, 'admin:1234');
    assert.equal(a.headers['Impersonate-User'], 'someone');
  });

  test('token and certificate files are re-read on refreshCredentials and when older than a minute', async (t) => {
    const tokenFile = join(dir, 'rotating-token');
    const certFile = join(dir, 'rotating-cert');
    writeFileSync(tokenFile, 'one');
    writeFileSync(certFile, 'cert-one');
    t.mock.timers.enable({ apis: ['Date'], now: 1_000_000 });
    const cfg = loadConfig({
      kubeconfig: kubeconfig(
        'rotating.yaml',
        ['server: https://10.0.0.1:6443'],
        [`tokenFile: ${tokenFile}`, `client-certificate: ${certFile}`],
      ),
      env: {},
    });
    const current = async () => {
      const a = await cfg.authenticate();
      return [a.headers.Authorization, String(a.cert)];
    };
    const stale = await cfg.authenticate();
    assert.equal(stale.headers.Authorization, 'Bearer one');
    writeFileSync(tokenFile, 'two');
    writeFileSync(certFile, 'cert-two');
    assert.deepEqual(await current(), ['Bearer one', 'cert-one'], 'cached for a minute');
    await cfg.refreshCredentials?.(stale);
    assert.deepEqual(await current(), ['Bearer two', 'cert-two']);
    writeFileSync(tokenFile, 'three');
    writeFileSync(certFile, 'cert-three');
    t.mock.timers.tick(61_000);
    assert.deepEqual(await current(), ['Bearer three', 'cert-three']);
    rmSync(tokenFile);
    t.mock.timers.tick(61_000);
    assert.deepEqual(await current(), ['Bearer three', 'cert-three'], 'keeps the last ones read');
  });

  test('errors name the file and the kubeconfig entry, and what to do', () => {
    const server = ['server: https://10.0.0.1:6443'];
    const missing = join(dir, 'nope', 'client.crt');
    throwsConfigError(
      () =>
        loadConfig({ kubeconfig: kubeconfig('badcert.yaml', server, [`client-certificate: ${missing}`]) }),
      new RegExp(
        `cannot read client-certificate ${missing} of user "ctx-user" in kubeconfig .*badcert\\.yaml`,
      ),
      /ENOENT/,
    );
    throwsConfigError(
      () =>
        loadConfig({
          kubeconfig: kubeconfig('badca.yaml', [...server, 'certificate-authority: nope.crt'], []),
        }),
      /cannot read certificate-authority .*nope\.crt of cluster "ctx-cluster"/,
    );
    throwsConfigError(
      () => loadConfig({ kubeconfig: kubeconfig('badtoken.yaml', server, ['token-file: gone']) }),
      /cannot read token-file .*gone of user "ctx-user"/,
    );
    throwsConfigError(
      () => loadConfig({ kubeconfig: join(dir, 'absent.yaml') }),
      /kubeconfig file not found: .*absent\.yaml/,
    );
    const broken = join(dir, 'broken.yaml');
    writeFileSync(broken, 'clusters: [\n');
    throwsConfigError(() => loadConfig({ kubeconfig: broken }), /failed to load kubeconfig .*broken\.yaml/);
    writeFileSync(broken, 'clusters: {a: 1}\n');
    throwsConfigError(() => loadConfig({ kubeconfig: broken }), /broken\.yaml: clusters is not a list/);
    const ok = kubeconfig('ok.yaml', server, ['token: t']);
    throwsConfigError(
      () => loadConfig({ kubeconfig: ok, context: 'other' }),
      /context "other" not found in kubeconfig \(known: ctx\)/,
    );
    const noCurrent = join(dir, 'nocurrent.yaml');
    writeFileSync(noCurrent, 'apiVersion: v1\nkind: Config\n');
    throwsConfigError(() => loadConfig({ kubeconfig: noCurrent }), /no current-context/);
    const dangling = join(dir, 'dangling.yaml');
    writeFileSync(
      dangling,
      'contexts:\n- name: c\n  context: {cluster: gone, user: u}\ncurrent-context: c\n',
    );
    throwsConfigError(
      () => loadConfig({ kubeconfig: dangling }),
      /context "c" has no cluster.*"gone" not found/,
    );
    throwsConfigError(
      () => loadConfig({ kubeconfig: kubeconfig('noserver.yaml', [], []) }),
      /cluster "ctx-cluster" has no server URL/,
    );
    throwsConfigError(
      () => loadConfig({ kubeconfig: kubeconfig('badurl.yaml', ['server: "::nope"'], []) }),
      /invalid server URL: ::nope/,
    );
    throwsConfigError(
      () => loadConfig({ kubeconfig: kubeconfig('scheme.yaml', ['server: ftp://x'], []) }),
      /unsupported server URL scheme ftp:/,
    );
    const nouser = join(dir, 'nouser.yaml');
    writeFileSync(
      nouser,
      'clusters:\n- name: k\n  cluster: {server: "https://x"}\ncontexts:\n- name: c\n  context: {cluster: k, user: ghost}\ncurrent-context: c\n',
    );
    throwsConfigError(
      () => loadConfig({ kubeconfig: nouser }),
      /refers to user "ghost", which is not defined/,
    );
  });
});

describe('kubeconfig merging and in-cluster', () => {
  test('KUBECONFIG: the first file to define a name or current-context wins', async () => {
    const a = join(dir, 'merge-a.yaml');
    const b = join(dir, 'merge-b.yaml');
    writeFileSync(
      a,
      'clusters:\n- name: shared\n  cluster: {server: "https://a"}\nusers:\n- name: u\n  user: {token: a}\n',
    );
    writeFileSync(
      b,
      [
        'clusters:',
        '- name: shared',
        '  cluster: {server: "https://b"}',
        'users:',
        '- name: u',
        '  user: {token: b}',
        'contexts:',
        '- name: c',
        '  context: {cluster: shared, user: u, namespace: from-b}',
        'current-context: c',
        '',
      ].join('\n'),
    );
    const merged = mergeKubeconfigs([readKubeconfig(a), readKubeconfig(b)]);
    assert.equal(merged.currentContext, 'c');
    assert.deepEqual(
      merged.clusters.map((c) => [c.name, c.server]),
      [['shared', 'https://a']],
    );
    const cfg = loadConfig({ env: { KUBECONFIG: `${a}:${b}` } });
    assert.equal(cfg.server, 'https://a');
    assert.equal(cfg.namespace, 'from-b');
    assert.equal((await cfg.authenticate()).headers.Authorization, 'Bearer a');
  });

  test('in-cluster: token, ca.crt and namespace files; the token is re-read on refresh', async () => {
    const prefix = join(dir, 'pod');
    const sa = join(prefix, 'var/run/secrets/kubernetes.io/serviceaccount');
    mkdirSync(sa, { recursive: true });
    writeFileSync(join(sa, 'token'), 'sa-1\n');
    writeFileSync(join(sa, 'ca.crt'), 'SA CA');
    writeFileSync(join(sa, 'namespace'), 'ops\n');
    const env = { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '6443' };
    const cfg = loadConfig({ env, inClusterPathPrefix: prefix });
    assert.equal(cfg.server, 'https://[fd00::1]:6443');
    assert.equal(cfg.namespace, 'ops');
    const first = await cfg.authenticate();
    assert.equal(first.headers.Authorization, 'Bearer sa-1');
    assert.equal(String(first.ca), 'SA CA');
    writeFileSync(join(sa, 'token'), 'sa-2');
    await cfg.refreshCredentials?.(first);
    assert.equal((await cfg.authenticate()).headers.Authorization, 'Bearer sa-2');
    // Like client-go, a missing ca.crt means the system roots.
    rmSync(join(sa, 'ca.crt'));
    assert.equal((await loadConfig({ env, inClusterPathPrefix: prefix }).authenticate()).ca, undefined);
  });
});

describe('exec, auth-provider and proxy-url: delegated to client-node', () => {
  /** An exec plugin printing the token "from-exec:<its argument>". */
  let plugin: string;
  /** The user lines of an exec plugin user whose token is "from-exec:<arg>". */
  const execUser = (arg: string) => [
    'exec:',
    '  apiVersion: client.authentication.k8s.io/v1',
    `  command: ${JSON.stringify(process.execPath)}`,
    `  args: [${JSON.stringify(plugin)}, ${arg}]`,
    '  interactiveMode: Never',
  ];
  before(() => {
    plugin = join(dir, 'exec-plugin.mjs');
    writeFileSync(
      plugin,
      [
        'process.stdout.write(JSON.stringify({',
        "  apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential',",
        "  status: { token: 'from-exec:' + process.argv[2] },",
        '}));',
      ].join('\n'),
    );
  });

  test('an exec plugin user works through client-node', async () => {
    const file = kubeconfig(
      'exec.yaml',
      ['server: https://10.0.0.1:6443', `certificate-authority-data: ${b64('EXEC CA')}`],
      execUser('arg'),
    );
    const a = await auth(file);
    assert.equal(a.headers.Authorization, 'Bearer from-exec:arg');
    assert.equal(String(a.ca), 'EXEC CA');
    assert.equal('agent' in a, false);
  });

  test('proxy-url: client-node builds the proxy agent', async () => {
    const cfg = loadConfig({
      kubeconfig: kubeconfig(
        'proxy.yaml',
        ['server: https://10.0.0.1:6443', 'proxy-url: http://127.0.0.1:3128'],
        ['token: via-proxy'],
      ),
      env: {},
    });
    const agent = () => cfg.proxyAgent;
    assert.equal(agent(), undefined, 'built by the first authenticate');
    assert.equal((await cfg.authenticate()).headers.Authorization, 'Bearer via-proxy');
    assert.equal(agent()?.constructor.name, 'HttpsProxyAgent');
  });

  test('in-cluster, token and certificate configurations never load client-node; exec does', () => {
    const token = kubeconfig(
      'plain.yaml',
      ['server: https://10.0.0.1:6443', `certificate-authority-data: ${b64('CA')}`],
      ['token: plain', `client-certificate-data: ${b64('CERT')}`, `client-key-data: ${b64('KEY')}`],
    );
    const exec = kubeconfig('exec-child.yaml', ['server: https://10.0.0.1:6443'], execUser('child'));
    const prefix = join(dir, 'child-pod');
    const sa = join(prefix, 'var/run/secrets/kubernetes.io/serviceaccount');
    mkdirSync(sa, { recursive: true });
    writeFileSync(join(sa, 'token'), 'pod-token');
    const src = (p: string) => JSON.stringify(new URL(p, import.meta.url).href);
    // A resolve hook records every module the child loads, imported or required. The exec case
    // shows that it does see client-node; in-cluster does not even need the YAML parser.
    const script = `
      import { registerHooks } from 'node:module';
      const loaded = [];
      registerHooks({ resolve(specifier, context, next) { const r = next(specifier, context); loaded.push(r.url); return r; } });
      const seen = (pkg) => loaded.filter((u) => u.includes('/node_modules/' + pkg + '/')).length;
      const out = {};
      await import(${src('../../src/index.ts')});
      const { loadConfig } = await import(${src('../../src/client/config.ts')});
      const pod = loadConfig({ env: { KUBERNETES_SERVICE_HOST: '10.96.0.1' }, inClusterPathPrefix: ${JSON.stringify(prefix)} });
      out.inCluster = [(await pod.authenticate()).headers.Authorization, seen('yaml'), seen('@kubernetes/client-node')];
      const cfg = loadConfig({ kubeconfig: ${JSON.stringify(token)}, env: {} });
      out.token = [(await cfg.authenticate()).headers.Authorization, seen('yaml') > 0, seen('@kubernetes/client-node')];
      const ex = loadConfig({ kubeconfig: ${JSON.stringify(exec)}, env: {} });
      out.exec = [(await ex.authenticate()).headers.Authorization, seen('@kubernetes/client-node') > 0];
      console.log(JSON.stringify(out));
    `;
    const out: unknown = JSON.parse(
      execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' }),
    );
    assert.deepEqual(out, {
      inCluster: ['Bearer pod-token', 0, 0],
      token: ['Bearer plain', true, 0],
      exec: ['Bearer from-exec:child', true],
    });
  });
});
