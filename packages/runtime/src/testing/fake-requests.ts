/** The fake client's request log and interception: recorded actions, onRequest hooks, injected failures. */
import { AsyncLocalStorage } from 'node:async_hooks';
import { resourceId } from '../api/resource.ts';
import {
  actionOf,
  type FakeAction,
  type FakeActionFilter,
  type FakeRequest,
  type FakeVerb,
  type RequestHook,
} from './fake-types.ts';
import { jsonClone } from './patch.ts';

interface Failure {
  verb: FakeVerb | '*';
  resId?: string;
  error: Error;
}

export class RequestLog {
  readonly #actions: FakeAction[] = [];
  readonly #hooks: RequestHook[] = [];
  readonly #failures: Failure[] = [];
  readonly #inHook = new AsyncLocalStorage<true>();

  /** Calls made from inside a hook are neither recorded nor intercepted. */
  get inHook(): boolean {
    return this.#inHook.getStore() === true;
  }

  record(request: FakeRequest): void {
    this.#actions.push(actionOf(request));
  }

  actions(filter: FakeActionFilter): FakeAction[] {
    const verbs = filter.verb === undefined ? undefined : ([] as FakeVerb[]).concat(filter.verb);
    const resId = filter.resource ? resourceId(filter.resource) : undefined;
    return this.#actions
      .filter(
        (a) =>
          (verbs === undefined || verbs.includes(a.verb)) &&
          (resId === undefined || resourceId(a.resource) === resId) &&
          (filter.namespace === undefined || a.namespace === filter.namespace) &&
          (filter.name === undefined || a.name === filter.name),
      )
      .map((a) => ({ ...a }));
  }

  clear(): void {
    this.#actions.length = 0;
  }

  failNext(verb: FakeVerb | '*', resId: string | undefined, error: Error): void {
    this.#failures.push({ verb, ...(resId === undefined ? {} : { resId }), error });
  }

  onRequest(hook: RequestHook): () => void {
    this.#hooks.push(hook);
    return () => {
      const index = this.#hooks.indexOf(hook);
      if (index >= 0) this.#hooks.splice(index, 1);
    };
  }

  /** Records a request and runs the hooks and injected failures for it (unless made from a hook). */
  async begin(request: FakeRequest, signal: AbortSignal | undefined): Promise<void> {
    signal?.throwIfAborted();
    if (this.inHook) return;
    this.record(request);
    await this.intercept(request);
    signal?.throwIfAborted();
  }

  async intercept(request: FakeRequest): Promise<void> {
    for (const hook of [...this.#hooks]) {
      const view: FakeRequest = {
        ...request,
        ...(request.object ? { object: jsonClone(request.object) } : {}),
        ...(request.patch ? { patch: jsonClone(request.patch) } : {}),
      };
      await this.#inHook.run(true, () => hook(view));
    }
    const resId = resourceId(request.resource);
    const index = this.#failures.findIndex(
      (f) => (f.verb === '*' || f.verb === request.verb) && (f.resId === undefined || f.resId === resId),
    );
    if (index >= 0) {
      const [failure] = this.#failures.splice(index, 1);
      if (failure) throw failure.error;
    }
  }
}
