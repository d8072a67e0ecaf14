/**
 * Server-side apply and deletion of rendered objects through @opkit/runtime's client. The REST resource of
 * each kind comes from discovery, so any kind the API server serves works (CRD-defined ones included).
 */
import {
  ApiError,
  ConnectionError,
  CustomResourceDefinitions,
  defineResource,
  isNotFound,
  NotFoundError,
  type Resource,
  type RestClient,
  type KubeObject as RuntimeObject,
} from '@opkit/runtime';
import { CliError } from '../errors.ts';
import { type Io, step } from '../io.ts';
import { type KubeObject, sortForApply } from './render.ts';

function describe(o: KubeObject): string {
  const ns = o.metadata.namespace ? `${o.metadata.namespace}/` : '';
  return `${o.kind} ${ns}${o.metadata.name}`;
}

/** Turns client errors into messages that say what to do. */
export function kubeError(err: unknown, server: string): never {
  if (err instanceof CliError) throw err;
  if (err instanceof ConnectionError) {
    throw new CliError(
      `cannot reach the API server at ${server}: ${err.message}`,
      'check that the cluster runs (opkit cluster status) and that --kubeconfig/--context point at it',
    );
  }
  if (err instanceof ApiError) {
    throw new CliError(
      `the API server refused: ${err.message}`,
      'check the message above; kubectl auth can-i tells about permissions',
    );
  }
  throw err;
}

export class Applier {
  readonly #client: RestClient;
  readonly #io: Io;
  readonly #discovered = new Map<string, Map<string, Resource>>();

  constructor(client: RestClient, io: Io) {
    this.#client = client;
    this.#io = io;
  }

  /** The REST resource of an object's kind, by discovery; undefined when the API does not serve it. */
  async resourceFor(
    o: Pick<KubeObject, 'apiVersion' | 'kind'>,
    refresh = false,
  ): Promise<Resource | undefined> {
    let kinds = refresh ? undefined : this.#discovered.get(o.apiVersion);
    if (!kinds) {
      kinds = new Map();
      try {
        const list = await this.#client.discover(o.apiVersion);
        const [group, version] = o.apiVersion.includes('/') ? o.apiVersion.split('/') : ['', o.apiVersion];
        for (const r of list.resources) {
          if (r.name.includes('/')) continue;
          kinds.set(
            r.kind,
            defineResource({
              group: group!,
              version: version!,
              kind: r.kind,
              plural: r.name,
              namespaced: r.namespaced,
            }),
          );
        }
      } catch (err) {
        if (!(err instanceof NotFoundError)) throw err;
      }
      this.#discovered.set(o.apiVersion, kinds);
    }
    return kinds.get(o.kind);
  }

  async #resourceOrFail(o: KubeObject): Promise<Resource> {
    const res = (await this.resourceFor(o)) ?? (await this.resourceFor(o, true));
    if (!res) {
      throw new CliError(
        `the API server does not serve ${o.kind} (${o.apiVersion}), needed for ${describe(o)}`,
        'install the CRDs first: opkit install',
      );
    }
    return res;
  }

  /** Server-side applies the objects (force: opkit owns what it applies), CRDs established before the rest. */
  async apply(objects: readonly KubeObject[], opts: { namespace?: string } = {}): Promise<void> {
    const sorted = sortForApply(objects);
    const first = sorted.filter((o) => o.kind === 'Namespace' || o.kind === 'CustomResourceDefinition');
    const rest = sorted.filter((o) => !first.includes(o));
    for (const o of first) await this.#applyOne(o, opts);
    const crds = first.filter((o) => o.kind === 'CustomResourceDefinition').map((o) => o.metadata.name);
    if (crds.length > 0) await this.waitEstablished(crds);
    for (const o of rest) await this.#applyOne(o, opts);
  }

  async #applyOne(o: KubeObject, opts: { namespace?: string }): Promise<void> {
    const res = await this.#resourceOrFail(o);
    const body = structuredClone(o) as unknown as RuntimeObject;
    if (res.namespaced && !body.metadata.namespace) body.metadata.namespace = opts.namespace ?? 'default';
    if (!res.namespaced) delete body.metadata.namespace;
    const namespace = body.metadata.namespace;
    await this.#client.patch(
      res,
      { name: o.metadata.name, ...(namespace ? { namespace } : {}) },
      { type: 'apply', body, force: true },
    );
    this.#io.err(`  applied ${o.kind} ${namespace ? `${namespace}/` : ''}${o.metadata.name}`);
  }

  /** Waits until every named CRD has the Established condition, and its kind is served. */
  async waitEstablished(names: readonly string[], timeoutMs = 60_000): Promise<void> {
    step(
      this.#io,
      `waiting for ${names.length === 1 ? `CRD ${names[0]}` : `${names.length} CRDs`} to be established`,
    );
    const deadline = Date.now() + timeoutMs;
    for (const name of names) {
      for (;;) {
        const crd = (await this.#client.get(CustomResourceDefinitions, { name })) as RuntimeObject & {
          spec: {
            group: string;
            names: { kind: string; plural: string };
            versions: Array<{ name: string; served: boolean }>;
            scope: string;
          };
          status?: { conditions?: Array<{ type: string; status: string }> };
        };
        const established = crd.status?.conditions?.some(
          (c) => c.type === 'Established' && c.status === 'True',
        );
        const version = crd.spec.versions.find((v) => v.served);
        if (established && version) {
          const res = defineResource({
            group: crd.spec.group,
            version: version.name,
            kind: crd.spec.names.kind,
            plural: crd.spec.names.plural,
            namespaced: crd.spec.scope === 'Namespaced',
          });
          if (await this.#client.isServed(res)) {
            this.#discovered.delete(res.apiVersion);
            break;
          }
        }
        if (Date.now() > deadline) {
          throw new CliError(
            `CRD ${name} is not established after ${timeoutMs / 1000} s`,
            `look at it: kubectl get crd ${name} -o yaml`,
          );
        }
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  }

  /** Deletes the objects in reverse apply order; missing ones (or kinds no longer served) are skipped. */
  async remove(objects: readonly KubeObject[], opts: { namespace?: string } = {}): Promise<void> {
    for (const o of sortForApply(objects).reverse()) {
      const res = await this.resourceFor(o);
      if (!res) {
        this.#io.err(`  skipped ${describe(o)} (its kind is not served)`);
        continue;
      }
      const namespace = res.namespaced ? (o.metadata.namespace ?? opts.namespace ?? 'default') : undefined;
      try {
        await this.#client.delete(
          res,
          { name: o.metadata.name, ...(namespace ? { namespace } : {}) },
          { propagationPolicy: 'Background' },
        );
        this.#io.err(`  deleted ${describe(o)}`);
      } catch (err) {
        if (!isNotFound(err)) throw err;
        this.#io.err(`  not found ${describe(o)}`);
      }
    }
  }
}
