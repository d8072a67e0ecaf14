/** Reads of the fake client's store: selectors, consistent lists at a resourceVersion, continue tokens. */
import type { KubeObject, ObjectList } from '../api/object.ts';
import type { Resource } from '../api/resource.ts';
import { resourceId } from '../api/resource.ts';
import type { ListOptions } from '../client/types.ts';
import { badRequestError, goneError, timeoutError } from './errors.ts';
import { compareKeys, copy, type FakeStore, type Obj, parseResourceVersion, sortKey } from './fake-store.ts';
import { isPlainObject } from './patch.ts';
import {
  type FieldRequirement,
  type LabelRequirement,
  matchesFields,
  matchesLabels,
  parseFieldSelector,
  parseLabelSelector,
  SelectorError,
} from './selectors.ts';

interface ContinueToken {
  rv: number;
  after: [string, string];
}

function encodeContinue(token: ContinueToken): string {
  return Buffer.from(JSON.stringify(token)).toString('base64url');
}

function decodeContinue(raw: string): ContinueToken {
  try {
    const token: unknown = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
    if (
      isPlainObject(token) &&
      typeof token.rv === 'number' &&
      Array.isArray(token.after) &&
      token.after.length === 2 &&
      token.after.every((s) => typeof s === 'string')
    ) {
      return { rv: token.rv, after: [token.after[0] as string, token.after[1] as string] };
    }
  } catch {
    // fall through
  }
  throw badRequestError(`invalid continue token "${raw}"`);
}

export interface Selectors {
  namespace?: string;
  labels: LabelRequirement[];
  fields: FieldRequirement[];
}

export function parseSelectors(
  namespace: string | undefined,
  labelSelector?: string,
  fieldSelector?: string,
): Selectors {
  try {
    return {
      namespace,
      labels: parseLabelSelector(labelSelector ?? ''),
      fields: parseFieldSelector(fieldSelector ?? ''),
    };
  } catch (err) {
    if (err instanceof SelectorError) throw badRequestError(err.message);
    throw err;
  }
}

export function selects(sel: Selectors, obj: KubeObject): boolean {
  if (sel.namespace !== undefined && obj.metadata.namespace !== sel.namespace) return false;
  return matchesLabels(sel.labels, obj.metadata.labels) && matchesFields(sel.fields, obj);
}

/** A list as the API server answers it: at the latest or a requested resourceVersion, page by page. */
export function listObjects<T extends KubeObject>(
  store: FakeStore,
  res: Resource<T>,
  namespace: string | undefined,
  opts: ListOptions,
): ObjectList<T> {
  const sel = parseSelectors(namespace, opts.labelSelector, opts.fieldSelector);
  const resId = resourceId(res);

  let rv = store.rv;
  let after: [string, string] | undefined;
  if (opts.continue) {
    const token = decodeContinue(opts.continue);
    if (token.rv < store.compactedRv || token.rv > store.rv) {
      throw goneError(
        'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.',
      );
    }
    rv = token.rv;
    after = token.after;
  } else if (opts.resourceVersion && opts.resourceVersion !== '0') {
    const requested = parseResourceVersion(opts.resourceVersion);
    if (requested > store.rv)
      throw timeoutError(`Too large resource version: ${requested}, current: ${store.rv}`);
    if (opts.resourceVersionMatch === 'Exact') {
      if (requested < store.compactedRv)
        throw goneError(`too old resource version: ${requested} (${store.compactedRv})`);
      rv = requested;
    }
  }

  const state: Map<string, Obj> = rv === store.rv ? store.current(resId) : store.stateAt(resId, rv);
  let items = [...state.values()]
    .filter((obj) => selects(sel, obj))
    .sort((a, b) => compareKeys(sortKey(a), sortKey(b)));
  if (after) {
    const start = after;
    items = items.filter((obj) => compareKeys(sortKey(obj), start) > 0);
  }

  const metadata: ObjectList<T>['metadata'] = { resourceVersion: String(rv) };
  // Without an explicit `continue` (or `onePage`) the real client follows the pages itself.
  const paged =
    (opts.continue !== undefined || opts.onePage === true) && opts.limit !== undefined && opts.limit > 0;
  if (paged && opts.limit !== undefined && items.length > opts.limit) {
    const remaining = items.length - opts.limit;
    items = items.slice(0, opts.limit);
    const last = items[items.length - 1];
    if (last) metadata.continue = encodeContinue({ rv, after: sortKey(last) });
    if (sel.labels.length === 0 && sel.fields.length === 0) metadata.remainingItemCount = remaining;
  }
  return {
    apiVersion: res.apiVersion,
    kind: `${res.kind}List`,
    metadata,
    items: items.map((obj) => copy<T>(obj)),
  };
}
