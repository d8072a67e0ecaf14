/**
 * The Database operator the way TypeScript operators are commonly written today: @kubernetes/client-node's
 * makeInformer per kind and a simple loop. Every event (of a Database or of one of its children) runs
 * the whole reconcile at once, with no work queue: read each child from the API, create it on 404, else
 * replace it; then write the status. No deduplication, no rate limiting, no comparison before writing.
 * (The credentials Secret is only created, never replaced: replacing it would regenerate passwords.)
 *
 * Children come from the same templates as the controller-runtime peer (rendered from opkit's builders,
 * see ../gen-templates.ts), so the three implementations create identical objects.
 *
 *   node bench/operators/client-node/main.ts --kubeconfig K --health-probe-bind-address 127.0.0.1:8081
 */
import {
  createHash,
  createHmac,
  createPrivateKey,
  pbkdf2Sync,
  randomBytes,
  X509Certificate,
} from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import type { Pod } from '@opkit/runtime';
import {
  describeNotReady,
  instanceStatuses,
} from '../../../operators/database/src/controllers/database/instances.ts';
import {
  generateCa,
  issueServerCertificate,
} from '../../../operators/database/src/controllers/database/tls/pki.ts';

const { values } = parseArgs({
  options: {
    kubeconfig: { type: 'string' },
    'metrics-bind-address': { type: 'string', default: '0' },
    'health-probe-bind-address': { type: 'string', default: ':8081' },
    'max-concurrent-reconciles': { type: 'string' },
    'leader-elect': { type: 'boolean' },
  },
});

const GROUP = 'myapp.example.com';
const VERSION = 'v1';
const PLURAL = 'databases';

interface Template {
  children: k8s.KubernetesObject[];
  passwordKeys: string[];
  /** Secret keys derived from a password (postgres: SCRAM verifiers). */
  derivedKeys: Array<{ key: string; usernameKey: string; passwordKey: string }>;
  scramIterations: number;
  /** ConfigMap keys left out of the config hash (the cluster record). */
  unhashedKeys: string[];
  /** The engine keeps a cluster record (postgres): status.targetPrimary. */
  clusterRecord: boolean;
  passwordLength: number;
  passwordAlphabet: string;
  endpoints: { readWrite: string; readOnly?: string; port: number };
  selector: string;
  secretName: string;
  statefulSetName: string;
  /** postgres: the TLS Secrets (see ../gen-templates.ts and ensureTls below). */
  tls?: TlsTemplate;
}
interface TlsTemplate {
  caCommonName: string;
  backdateSeconds: number;
  caValiditySeconds: number;
  serverValiditySeconds: number;
  serverHosts: string[];
  caSecret: k8s.V1Secret;
  serverSecret: k8s.V1Secret;
  appSecret: k8s.V1Secret;
  appPasswordKey: string;
  appKeys: { password: string; ca: string; uri: string };
}
const templates = JSON.parse(
  readFileSync(join(import.meta.dirname, '..', 'controller-runtime', 'templates.json'), 'utf8'),
) as {
  placeholders: { name: string; namespace: string; configHash: string; password: string };
  templates: Record<string, Template>;
};

/** sha256 of the ConfigMap's data (keys sorted), like opkit's configHash: a config change rolls the pods. */
function configHash(data: Record<string, string>, unhashed: string[]): string {
  const h = createHash('sha256');
  for (const key of Object.keys(data).sort()) {
    if (!unhashed.includes(key)) h.update(`${key}\0${data[key]}\0`);
  }
  return h.digest('hex').slice(0, 32);
}

interface Database extends k8s.KubernetesObject {
  metadata: k8s.V1ObjectMeta;
  spec: {
    engine: string;
    version: string;
    replicas?: number;
    storage: string;
    deletionPolicy?: string;
    synchronousReplicas?: number;
  };
  status?: Record<string, unknown> & { conditions?: Condition[] };
}
interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
  observedGeneration?: number;
  lastTransitionTime: string;
}

const kc = new k8s.KubeConfig();
if (values.kubeconfig) kc.loadFromFile(values.kubeconfig);
else kc.loadFromDefault();
const core = kc.makeApiClient(k8s.CoreV1Api);
/** The primary lease's objects (ServiceAccount, Role, RoleBinding, Lease): created once, as they are. */
const objects = k8s.KubernetesObjectApi.makeApiClient(kc);
const CREATE_ONLY = new Set(['ServiceAccount', 'Role', 'RoleBinding', 'Lease']);
const apps = kc.makeApiClient(k8s.AppsV1Api);
const policy = kc.makeApiClient(k8s.PolicyV1Api);
const custom = kc.makeApiClient(k8s.CustomObjectsApi);
const mergePatch = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);

function render(db: Database): Template | undefined {
  const t = templates.templates[`${db.spec.engine}/${db.spec.version}/${db.spec.replicas ?? 1}`];
  const p = templates.placeholders;
  if (
    !t ||
    db.metadata.name!.length !== p.name.length ||
    db.metadata.namespace!.length !== p.namespace.length
  ) {
    return undefined;
  }
  const text = JSON.stringify(t)
    .replaceAll(templates.placeholders.name, db.metadata.name!)
    .replaceAll(templates.placeholders.namespace, db.metadata.namespace!);
  const out = JSON.parse(text) as Template;
  const cm = out.children.find((c) => c.kind === 'ConfigMap') as k8s.V1ConfigMap | undefined;
  const hash = configHash(cm?.data ?? {}, out.unhashedKeys);
  const sts = out.children.find((c) => c.kind === 'StatefulSet') as k8s.V1StatefulSet | undefined;
  const annotations = sts?.spec?.template?.metadata?.annotations ?? {};
  for (const [k, v] of Object.entries(annotations)) {
    if (v === templates.placeholders.configHash) annotations[k] = hash;
  }
  for (const child of out.children) {
    // Like opkit: under Retain the Secret outlives the Database, together with the data it unlocks.
    if (child.kind === 'Secret' && (db.spec.deletionPolicy ?? 'Retain') !== 'Delete') continue;
    child.metadata!.ownerReferences = [controllerRef(db)];
  }
  return out;
}

/** The Database as its children's controller owner reference. */
function controllerRef(db: Database): k8s.V1OwnerReference {
  return {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: 'Database',
    name: db.metadata.name!,
    uid: db.metadata.uid!,
    controller: true,
    blockOwnerDeletion: true,
  };
}

function password(t: Template): string {
  const bytes = randomBytes(t.passwordLength);
  return Array.from(bytes, (b) => t.passwordAlphabet[b % t.passwordAlphabet.length]).join('');
}

/** SCRAM-SHA-256 in PostgreSQL's pg_authid format, salt derived as opkit's roleVerifier (scram.ts) does. */
// Verifiers already computed, by iterations and salt (bounded, the oldest first out), and a stored one
// with this password's salt kept as it is, as opkit's scram.ts.
const verifiers = new Map<string, string>();
function roleVerifier(
  password: string,
  databaseId: string,
  role: string,
  iterations: number,
  stored: string,
): string {
  const salt = createHmac('sha256', password)
    .update(`opkit\0${databaseId}\0${role}`)
    .digest()
    .subarray(0, 16);
  const saltText = salt.toString('base64');
  const key = `${iterations}:${saltText}`;
  const known = verifiers.get(key);
  if (known !== undefined) return known;
  if (verifiers.size >= 16_384) verifiers.delete(verifiers.keys().next().value as string);
  const stays =
    new RegExp(
      `^SCRAM-SHA-256\\$${iterations}:([A-Za-z0-9+/]{22}==)\\$[A-Za-z0-9+/]{43}=:[A-Za-z0-9+/]{43}=$`,
    ).exec(stored)?.[1] === saltText;
  const verifier = stays ? stored : computeVerifier(password, salt, iterations);
  verifiers.set(key, verifier);
  return verifier;
}

function computeVerifier(password: string, salt: Buffer, iterations: number): string {
  const salted = pbkdf2Sync(password.normalize('NFKC'), salt, iterations, 32, 'sha256');
  const storedKey = createHash('sha256')
    .update(createHmac('sha256', salted).update('Client Key').digest())
    .digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}

/** The derived keys (base64) out of date in `data` (base64), computed from its usernames and passwords. */
function derivedData(t: Template, uid: string, data: Record<string, string>): Record<string, string> {
  const plain = (k: string) => Buffer.from(data[k] ?? '', 'base64').toString();
  const out: Record<string, string> = {};
  for (const d of t.derivedKeys) {
    const user = plain(d.usernameKey);
    const pass = plain(d.passwordKey);
    if (!user || !pass) continue;
    const v = Buffer.from(roleVerifier(pass, uid, user, t.scramIterations, plain(d.key))).toString('base64');
    if (data[d.key] !== v) out[d.key] = v;
  }
  return out;
}

function code(err: unknown): number | undefined {
  return err instanceof k8s.ApiException ? err.code : undefined;
}

/** Read; 404 -> create; else replace with the desired object (carrying the live resourceVersion). */
async function ensure(obj: k8s.KubernetesObject, t: Template, uid: string): Promise<void> {
  const name = obj.metadata!.name!;
  const namespace = obj.metadata!.namespace!;
  const req = { name, namespace };
  const withVersion = <T extends k8s.KubernetesObject>(live: k8s.KubernetesObject): T =>
    ({ ...obj, metadata: { ...obj.metadata, resourceVersion: live.metadata?.resourceVersion } }) as T;
  if (CREATE_ONLY.has(obj.kind ?? '')) {
    // opkit creates them and then only writes the Lease's holder when the primary changes (never on kwok).
    try {
      await objects.read({ apiVersion: obj.apiVersion, kind: obj.kind, metadata: { name, namespace } });
      return;
    } catch (err) {
      if (code(err) !== 404) throw err;
    }
    try {
      await objects.create(obj);
    } catch (err) {
      if (code(err) !== 409) throw err;
    }
    return;
  }
  try {
    switch (obj.kind) {
      case 'Secret': {
        // Never replaced (that would regenerate the passwords); the verifiers follow the passwords.
        const live = await core.readNamespacedSecret(req);
        const derived = derivedData(t, uid, live.data ?? {});
        if (Object.keys(derived).length > 0) {
          await core.patchNamespacedSecret({ ...req, body: { data: derived } }, mergePatch);
        }
        return;
      }
      case 'ConfigMap': {
        const live = await core.readNamespacedConfigMap(req);
        await core.replaceNamespacedConfigMap({ ...req, body: withVersion(live) });
        return;
      }
      case 'Service': {
        const live = await core.readNamespacedService(req);
        await core.replaceNamespacedService({ ...req, body: withVersion(live) });
        return;
      }
      case 'StatefulSet': {
        const live = await apps.readNamespacedStatefulSet(req);
        await apps.replaceNamespacedStatefulSet({ ...req, body: withVersion(live) });
        return;
      }
      case 'PodDisruptionBudget': {
        const live = await policy.readNamespacedPodDisruptionBudget(req);
        await policy.replaceNamespacedPodDisruptionBudget({ ...req, body: withVersion(live) });
        return;
      }
    }
  } catch (err) {
    if (code(err) !== 404) throw err;
  }
  try {
    switch (obj.kind) {
      case 'Secret': {
        const { stringData, ...s } = obj as k8s.V1Secret;
        const data: Record<string, string> = {};
        for (const [k, v] of Object.entries(stringData ?? {})) data[k] = Buffer.from(v).toString('base64');
        for (const k of t.passwordKeys) data[k] = Buffer.from(password(t)).toString('base64');
        Object.assign(data, derivedData(t, uid, data));
        await core.createNamespacedSecret({ namespace, body: { ...s, data } });
        return;
      }
      case 'ConfigMap':
        await core.createNamespacedConfigMap({ namespace, body: obj as k8s.V1ConfigMap });
        return;
      case 'Service':
        await core.createNamespacedService({ namespace, body: obj as k8s.V1Service });
        return;
      case 'StatefulSet':
        await apps.createNamespacedStatefulSet({ namespace, body: obj as k8s.V1StatefulSet });
        return;
      case 'PodDisruptionBudget':
        await policy.createNamespacedPodDisruptionBudget({
          namespace,
          body: obj as k8s.V1PodDisruptionBudget,
        });
        return;
    }
  } catch (err) {
    if (code(err) !== 409) throw err; // a concurrent reconcile created it first
  }
}

const b64 = (s: string) => Buffer.from(s).toString('base64');
const plainOf = (s: k8s.V1Secret | undefined, k: string) =>
  s?.data?.[k] === undefined ? undefined : Buffer.from(s.data[k], 'base64').toString();

async function readSecret(name: string, namespace: string): Promise<k8s.V1Secret | undefined> {
  try {
    return await core.readNamespacedSecret({ name, namespace });
  } catch (err) {
    if (code(err) === 404) return undefined;
    throw err;
  }
}

/** Creates a Secret (409: a concurrent reconcile did) or replaces it with the live resourceVersion. */
async function putSecret(want: k8s.V1Secret, live: k8s.V1Secret | undefined): Promise<void> {
  const namespace = want.metadata!.namespace!;
  if (!live) {
    await core.createNamespacedSecret({ namespace, body: want }).catch((err: unknown) => {
      if (code(err) !== 409) throw err;
    });
    return;
  }
  await core.replaceNamespacedSecret({
    name: want.metadata!.name!,
    namespace,
    body: { ...want, metadata: { ...want.metadata, resourceVersion: live.metadata?.resourceVersion } },
  });
}

/** The server certificate is kept while signed by the CA, holding every name, a third of its validity left. */
function serverUsable(server: k8s.V1Secret | undefined, caPem: string, hosts: string[]): boolean {
  try {
    const cert = new X509Certificate(plainOf(server, 'tls.crt') ?? '');
    const ca = new X509Certificate(caPem);
    const keyOk = cert.checkPrivateKey(createPrivateKey(plainOf(server, 'tls.key') ?? ''));
    const names = new Set((cert.subjectAltName ?? '').split(', ').map((n) => n.replace(/^[^:]+:/, '')));
    const from = Date.parse(cert.validFrom);
    const to = Date.parse(cert.validTo);
    return (
      keyOk &&
      cert.checkIssued(ca) &&
      cert.verify(ca.publicKey) &&
      hosts.every((h) => names.has(h)) &&
      Date.now() < to - (to - from) / 3
    );
  } catch {
    return false;
  }
}

/**
 * postgres: the CA in `<name>-ca` (kept once made; owned only under deletionPolicy Delete), the server
 * certificate in `<name>-server` (issued when missing or unfit) and `<name>-app` (replaced every time,
 * like the other children), certificates from opkit's pki.ts (@opkit/runtime/pki on node:crypto).
 */
async function ensureTls(db: Database, t: TlsTemplate, credentialsName: string): Promise<void> {
  const namespace = db.metadata.namespace!;
  const owner = controllerRef(db);
  const owned = (s: k8s.V1Secret, own: boolean): k8s.V1Secret => ({
    ...s,
    metadata: { ...s.metadata, ...(own ? { ownerReferences: [owner] } : {}) },
  });
  const now = new Date(Math.floor(Date.now() / 1000) * 1000);
  const caLive = await readSecret(t.caSecret.metadata!.name!, namespace);
  let ca = caLive && {
    certPem: plainOf(caLive, 'ca.crt') ?? '',
    keyPem: plainOf(caLive, 'ca.key') ?? '',
  };
  if (!ca) {
    ca = await generateCa(t.caCommonName, now);
    const data = { 'ca.crt': b64(ca.certPem), 'ca.key': b64(ca.keyPem) };
    await putSecret(owned({ ...t.caSecret, data }, db.spec.deletionPolicy === 'Delete'), undefined);
    // A concurrent reconcile (no queue here) may have created its own first (409): sign with the stored one.
    const stored = await readSecret(t.caSecret.metadata!.name!, namespace);
    ca = { certPem: plainOf(stored, 'ca.crt') ?? '', keyPem: plainOf(stored, 'ca.key') ?? '' };
  }
  const serverLive = await readSecret(t.serverSecret.metadata!.name!, namespace);
  if (!serverUsable(serverLive, ca.certPem, t.serverHosts)) {
    const server = await issueServerCertificate(ca, t.serverHosts, now);
    const data = { 'tls.crt': b64(server.certPem), 'tls.key': b64(server.keyPem), 'ca.crt': b64(ca.certPem) };
    await putSecret(owned({ ...t.serverSecret, data }, true), serverLive);
  }
  const credentials = await readSecret(credentialsName, namespace);
  const password = plainOf(credentials, t.appPasswordKey);
  if (!password) throw new Error(`Secret ${credentialsName} has no ${t.appPasswordKey} yet`);
  const { stringData, ...app } = t.appSecret;
  const data: Record<string, string> = {};
  for (const [k, v] of Object.entries(stringData ?? {}))
    data[k] = b64(v.replaceAll(templates.placeholders.password, password));
  data[t.appKeys.ca] = b64(ca.certPem);
  await putSecret(owned({ ...app, data }, true), await readSecret(app.metadata!.name!, namespace));
}

function condition(prev: Condition[] | undefined, c: Omit<Condition, 'lastTransitionTime'>): Condition {
  const old = prev?.find((p) => p.type === c.type);
  return {
    ...c,
    lastTransitionTime:
      old && old.status === c.status
        ? old.lastTransitionTime
        : new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
  };
}

async function reconcile(namespace: string, name: string): Promise<void> {
  const db = databases.get(name, namespace) as Database | undefined;
  if (!db || db.metadata.deletionTimestamp) return;
  const t = render(db);
  if (!t) {
    console.error(`unsupported Database ${namespace}/${name}: ${db.spec.engine} ${db.spec.version}`);
    return;
  }
  for (const child of t.children) await ensure(child, t, db.metadata.uid!);
  if (t.tls) await ensureTls(db, t.tls, t.secretName);
  const replicas = db.spec.replicas ?? 1;
  if (replicas <= 1) {
    for (const del of [
      () => core.deleteNamespacedService({ name: `${name}-ro`, namespace }),
      () => policy.deleteNamespacedPodDisruptionBudget({ name, namespace }),
      () => policy.deleteNamespacedPodDisruptionBudget({ name: `${name}-primary`, namespace }),
    ]) {
      await del().catch((err: unknown) => {
        if (code(err) !== 404) throw err;
      });
    }
  }
  const sts = (await apps.readNamespacedStatefulSet({
    name: t.statefulSetName,
    namespace,
  })) as k8s.V1StatefulSet;
  const st = sts.status;
  // An engine with a cluster record (postgres) reports each instance from its pod, as opkit does
  // (instances.ts, the same pure function), and counts those ready; else the StatefulSet's count.
  const targetPrimary = String(db.status?.targetPrimary ?? `${t.statefulSetName}-0`);
  const instances = t.clusterRecord
    ? instanceStatuses(
        t.statefulSetName,
        replicas,
        targetPrimary,
        (await core.listNamespacedPod({ namespace, labelSelector: t.selector })).items as Pod[],
      )
    : undefined;
  const ready = instances ? instances.filter((i) => i.ready).length : (st?.readyReplicas ?? 0);
  const running =
    (st?.observedGeneration ?? 0) >= (sts.metadata?.generation ?? 0) &&
    Boolean(st?.currentRevision) &&
    st?.currentRevision === st?.updateRevision &&
    (sts.spec?.replicas ?? 1) === replicas &&
    (st?.replicas ?? 0) === replicas &&
    ready >= replicas &&
    (st?.updatedReplicas ?? replicas) >= replicas;
  const ran = ['Running', 'Updating', 'Degraded'].includes(String(db.status?.phase));
  const phase = running ? 'Running' : ran ? 'Updating' : 'Provisioning';
  const reason = running ? 'AllReplicasReady' : ran ? 'Scaling' : 'Provisioning';
  const down = running ? undefined : describeNotReady(instances);
  const msg = `${ready}/${replicas} replicas ready${down ? `; ${down}` : ''}`;
  const gen = db.metadata.generation;
  const prev = db.status?.conditions;
  const status = {
    phase,
    replicas: st?.replicas ?? 0,
    readyReplicas: ready,
    endpoints: t.endpoints,
    secretName: t.secretName,
    selector: t.selector,
    // Like opkit's cluster record: <name>-0 until recorded otherwise (this peer reads no pod reports).
    ...(t.clusterRecord
      ? {
          targetPrimary,
          ...(db.status?.systemIdentifier ? { systemIdentifier: String(db.status.systemIdentifier) } : {}),
          replicationMode: db.spec.synchronousReplicas
            ? `Synchronous (ANY ${db.spec.synchronousReplicas})`
            : 'Asynchronous',
          instances,
        }
      : {}),
    observedGeneration: gen,
    conditions: [
      condition(prev, {
        type: 'Ready',
        status: running ? 'True' : 'False',
        reason,
        message: msg,
        observedGeneration: gen,
      }),
      condition(prev, {
        type: 'Progressing',
        status: running ? 'False' : 'True',
        reason: running ? 'ReconcileComplete' : reason,
        message: running ? `${replicas} of ${replicas} replicas ready on the latest revision` : msg,
        observedGeneration: gen,
      }),
      condition(prev, {
        type: 'Degraded',
        status: 'False',
        reason: 'AsExpected',
        message: 'no problems found',
        observedGeneration: gen,
      }),
    ],
  };
  await custom.patchNamespacedCustomObjectStatus(
    { group: GROUP, version: VERSION, namespace, plural: PLURAL, name, body: { status } },
    mergePatch,
  );
}

function run(namespace: string | undefined, name: string | undefined) {
  if (!namespace || !name) return;
  reconcile(namespace, name).catch((err: unknown) => {
    console.error(
      `reconcile ${namespace}/${name} failed: ${err instanceof Error ? err.message : String(err)}`,
    );
    // The usual retry: try again a bit later.
    setTimeout(() => run(namespace, name), 1000);
  });
}

function restartOnError<T extends k8s.KubernetesObject>(informer: k8s.Informer<T>, what: string) {
  informer.on('error', (err: unknown) => {
    console.error(`${what} informer error: ${String(err)}; restarting in 5 s`);
    setTimeout(() => void informer.start(), 5000);
  });
}

const databases = k8s.makeInformer<Database>(
  kc,
  `/apis/${GROUP}/${VERSION}/${PLURAL}`,
  () =>
    custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL }) as Promise<
      k8s.KubernetesListObject<Database>
    >,
);
for (const ev of ['add', 'update'] as const) {
  databases.on(ev, (db) => run(db.metadata.namespace, db.metadata.name));
}
restartOnError(databases, 'Database');

const children: Array<k8s.Informer<k8s.KubernetesObject>> = [
  k8s.makeInformer(kc, '/api/v1/secrets', () => core.listSecretForAllNamespaces()),
  k8s.makeInformer(kc, '/api/v1/configmaps', () => core.listConfigMapForAllNamespaces()),
  k8s.makeInformer(kc, '/api/v1/services', () => core.listServiceForAllNamespaces()),
  k8s.makeInformer(kc, '/apis/apps/v1/statefulsets', () => apps.listStatefulSetForAllNamespaces()),
  k8s.makeInformer(kc, '/apis/policy/v1/poddisruptionbudgets', () =>
    policy.listPodDisruptionBudgetForAllNamespaces(),
  ),
];
for (const informer of children) {
  for (const ev of ['add', 'update', 'delete'] as const) {
    informer.on(ev, (o) => {
      const owner = o.metadata?.ownerReferences?.find((r) => r.controller && r.kind === 'Database');
      if (owner) run(o.metadata?.namespace, owner.name);
    });
  }
  restartOnError(informer, 'child');
}

let ready = false;
const probe = values['health-probe-bind-address'];
if (probe && probe !== '0') {
  const [host, port] = probe.startsWith(':') ? ['0.0.0.0', probe.slice(1)] : probe.split(':');
  createServer((req, res) => {
    const ok = req.url?.startsWith('/healthz') || ready;
    res.writeHead(ok ? 200 : 503).end(ok ? 'ok' : 'not ready');
  }).listen(Number(port), host);
}

await Promise.all([databases.start(), ...children.map((i) => i.start())]);
ready = true;
console.log('client-node Database operator started: informers synced');
for (const sig of ['SIGTERM', 'SIGINT'] as const) {
  process.on(sig, () => {
    void Promise.all([databases.stop(), ...children.map((i) => i.stop())]).finally(() => process.exit(0));
  });
}
