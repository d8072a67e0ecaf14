/**
 * The equivalence check: for the same input, every implementation must leave the same objects. Objects
 * are compared after removing what the API server sets (uid, resourceVersion, timestamps, managedFields,
 * cluster IPs, status of children) and what is random by design (password values: only their length and
 * alphabet are compared; SCRAM verifiers, whose salt differs per Database: their mechanism, iteration count and
 * which of the Secret's passwords they verify; certificates and keys: by meaning, certificates.ts). A
 * value a derived Secret (`-app`) copies from another Secret of the namespace compares as that Secret's
 * key. The Databases' status is compared too, without timestamps.
 *
 * What a peer does not do yet is a named known difference (KNOWN_DIFFERENCES): its diffs are reported
 * under that name, apart from the others, never dropped.
 */
import { scramVerifier } from '../../operators/database/src/controllers/database/engines/postgres/scram.ts';
import { type CaIndex, caIndex, describePem, isPem } from './certificates.ts';
import type { KubeObject } from './kube.ts';

export interface KnownDifference {
  /** 'tls': the implementations named do not make the TLS Secrets (their convergence does not wait for them). */
  id: string;
  /** What the implementations named do not do, as the report says it. */
  name: string;
  impls: readonly string[];
  /** The snapshot keys ("Kind/name") it concerns. */
  keys: RegExp;
}

/**
 * None now. Earlier entries: the TLS Secrets ({ id: 'tls', name: 'no TLS Secrets yet (postgres: <name>-ca,
 * <name>-server, <name>-app)', impls: ['controller-runtime', 'client-node'], keys:
 * /^Secret\/.+-(ca|server|app)$/ }) and the primary's PodDisruptionBudget ({ id: 'primary-pdb', keys:
 * /^PodDisruptionBudget\/.+-primary$/ }), both made by the peers since.
 */
export const KNOWN_DIFFERENCES: readonly KnownDifference[] = [];

/** The implementation does what the known difference `id` says the peers named there do not. */
export function makes(impl: string, id: string): boolean {
  return !KNOWN_DIFFERENCES.some((d) => d.id === id && d.impls.includes(impl));
}

/** The implementation writes the TLS Secrets (everything but the peers named in KNOWN_DIFFERENCES). */
export function makesTls(impl: string): boolean {
  return makes(impl, 'tls');
}

/** What normalizing a Secret may use from the rest of its namespace. */
export interface SecretContext {
  cas: CaIndex;
  /** Generated values of the Secrets that hold no certificates (value -> "Secret <name> <key>"). */
  sources: Map<string, string>;
}

/** The context of a namespace's Secrets, for normalize. */
export function secretContext(secrets: readonly KubeObject[]): SecretContext {
  const sources = new Map<string, string>();
  for (const s of secrets) {
    const data = (s.data ?? {}) as Record<string, string>;
    const values = Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()] as const);
    if (values.some(([, v]) => isPem(v))) continue;
    for (const [k, v] of values) if (RANDOM.test(v)) sources.set(v, `Secret ${s.metadata.name} ${k}`);
  }
  return { cas: caIndex(secrets), sources };
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

function sortKeys(v: Json): Json {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') {
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, sortKeys(v[k]!)]),
    );
  }
  return v;
}

/** Generated passwords: long runs of letters and digits (a host name has dots, a user name is short). */
const RANDOM = /^[A-Za-z0-9]{20,}$/;
/** A SCRAM verifier as PostgreSQL stores it: mechanism$iterations:salt$StoredKey:ServerKey (the salt differs per Database). */
const SCRAM = /^(SCRAM-SHA-256)\$(\d+):([A-Za-z0-9+/=]+)\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$/;

/** The key of the password a verifier was computed from (with its own salt), or undefined. */
function verifiedPassword(verifier: string, salt: string, iterations: number, randoms: [string, string][]) {
  const s = Buffer.from(salt, 'base64');
  return randoms.find(([, pw]) => scramVerifier(pw, s, iterations) === verifier)?.[0];
}

export function normalize(kind: string, o: KubeObject, ctx?: SecretContext): Json {
  const x = structuredClone(o) as unknown as { [k: string]: Json } & { metadata: { [k: string]: Json } };
  const md = x.metadata;
  for (const k of [
    'uid',
    'resourceVersion',
    'creationTimestamp',
    'managedFields',
    'generation',
    'selfLink',
  ]) {
    delete md[k];
  }
  if (Array.isArray(md.ownerReferences)) {
    for (const r of md.ownerReferences as Array<{ [k: string]: Json }>) delete r.uid;
  }
  if (md.finalizers && Array.isArray(md.finalizers) && md.finalizers.length === 0) delete md.finalizers;
  if (kind !== 'Database') delete x.status;
  if (kind === 'Service') {
    const spec = x.spec as { [k: string]: Json };
    if (spec.clusterIP !== 'None') {
      delete spec.clusterIP;
      delete spec.clusterIPs;
    } else spec.clusterIPs = ['None'];
  }
  if (kind === 'Secret') {
    const data = (x.data ?? {}) as { [k: string]: string };
    const decoded = Object.fromEntries(
      Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]),
    );
    const randoms = Object.entries(decoded).filter(([, v]) => RANDOM.test(v));
    const pems = describePem(o.metadata.name, decoded, ctx?.cas);
    // Values copied from another Secret (not from this one): named by where they come from.
    const copied = [...(ctx?.sources ?? [])].filter(
      ([, where]) => !where.startsWith(`Secret ${o.metadata.name} `),
    );
    const out: { [k: string]: string } = { ...pems };
    for (const [k, v] of Object.entries(decoded)) {
      if (pems[k] !== undefined) continue;
      let value = v;
      for (const [cv, where] of copied) {
        value = value === cv ? `<${where}>` : value.replaceAll(cv, `<${where}>`);
      }
      const scram = SCRAM.exec(v);
      if (scram) {
        const of = verifiedPassword(v, scram[3]!, Number(scram[2]), randoms) ?? 'no password of this Secret';
        out[k] = `<${scram[1]} verifier of ${of}, ${scram[2]} iterations>`;
        continue;
      }
      for (const [rk, rv] of randoms) {
        value = value === rv ? `<random ${rv.length} letters and digits>` : value.replaceAll(rv, `<${rk}>`);
      }
      out[k] = value;
    }
    x.data = out;
  }
  if (kind === 'Database') {
    delete x.spec;
    const status = x.status as { conditions?: Array<{ [k: string]: Json }> } | undefined;
    for (const c of status?.conditions ?? []) delete c.lastTransitionTime;
  }
  return sortKeys(x as Json);
}

/** Differences of b against a, as readable lines (path: a-value != b-value). */
export function diff(a: Json | undefined, b: Json | undefined, path = ''): string[] {
  if (JSON.stringify(a) === JSON.stringify(b)) return [];
  const isObj = (v: Json | undefined): v is { [k: string]: Json } =>
    v !== null && typeof v === 'object' && !Array.isArray(v);
  if (isObj(a) && isObj(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
    return keys.flatMap((k) => diff(a[k], b[k], `${path}.${k}`));
  }
  if (Array.isArray(a) && Array.isArray(b) && a.length === b.length) {
    return a.flatMap((v, i) => diff(v, b[i], `${path}[${i}]`));
  }
  const show = (v: Json | undefined) => {
    const s = v === undefined ? '(absent)' : JSON.stringify(v);
    return s.length > 160 ? `${s.slice(0, 160)}...` : s;
  };
  return [`${path || '.'}: ${show(a)} != ${show(b)}`];
}

export interface EquivalenceReport {
  reference: string;
  impl: string;
  childDiffs: string[];
  statusDiffs: string[];
  /** Differences of a known difference (KNOWN_DIFFERENCES), by its name: reported apart, not dropped. */
  knownDiffs: Record<string, string[]>;
}

export function compareSnapshots(
  reference: string,
  ref: Record<string, unknown>,
  impl: string,
  other: Record<string, unknown>,
  knownDifferences: readonly KnownDifference[] = KNOWN_DIFFERENCES,
): EquivalenceReport {
  const childDiffs: string[] = [];
  const statusDiffs: string[] = [];
  const knownDiffs: Record<string, string[]> = {};
  const known = knownDifferences.filter((d) => d.impls.includes(impl) !== d.impls.includes(reference));
  const keys = [...new Set([...Object.keys(ref), ...Object.keys(other)])].sort();
  for (const k of keys) {
    const lines = diff(ref[k] as Json | undefined, other[k] as Json | undefined).map((l) => `${k} ${l}`);
    if (lines.length === 0) continue;
    const kd = known.find((d) => d.keys.test(k));
    if (kd) knownDiffs[kd.name] = [...(knownDiffs[kd.name] ?? []), ...lines];
    else if (k.startsWith('Database/')) statusDiffs.push(...lines);
    else childDiffs.push(...lines);
  }
  return { reference, impl, childDiffs, statusDiffs, knownDiffs };
}
