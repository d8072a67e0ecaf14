/**
 * Cache reads and watch events agree, against a real kube-apiserver: a controller that `.owns()`
 * ConfigMaps (the resource's default informer) and `.watches()` labelled ConfigMaps through a label
 * selector (a second, selector-scoped informer) and lists the labelled ones from the cache in its
 * reconciler must see every label / unlabel / create / delete change. The two informers follow two
 * independent watch streams: a reconcile woken by one must not read the other, which may not have
 * seen the change yet (issue 13: about half of the changes stayed unreconciled).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type ControlPlane, start } from '@opkit/controlplane';
import { ConfigMaps, Namespaces, Secrets } from '../../src/api/builtin.ts';
import { parseFieldSelector, parseLabelSelector, SelectorParseError } from '../../src/cache/selector.ts';
import { BadRequestError } from '../../src/client/errors.ts';
import { createClient, loadConfig, type RestClient } from '../../src/client/index.ts';
import { controllerFor } from '../../src/controller/index.ts';
import { silentLogger } from '../../src/log/logger.ts';
import { Manager } from '../../src/manager/manager.ts';
import { eventually } from '../../src/testing/eventually.ts';

const LABEL = 'test.opkit.dev/team';
const SELECTOR = `${LABEL}=a`;

describe('cache reads and watch events agree (real API server)', { timeout: 600_000 }, () => {
  let cp: ControlPlane;
  let rest: RestClient;

  before(
    async () => {
      cp = await start({ mode: 'apiserver' });
      rest = createClient(loadConfig({ kubeconfig: cp.kubeconfigPath }), {
        fieldManager: 'consistency-test',
      });
    },
    { timeout: 240_000 },
  );

  after(async () => {
    rest?.close();
    await cp?.stop();
  });

  test('every label, unlabel, create and delete of a watched ConfigMap is reconciled with a cache that has seen it', async () => {
    const ns = 'consistency';
    await rest.create(Namespaces, { metadata: { name: ns } });
    const client = createClient(loadConfig({ kubeconfig: cp.kubeconfigPath }), {
      fieldManager: 'consistency',
    });
    const mgr = new Manager({ client, logger: silentLogger(), namespace: ns });
    const summary = { namespace: ns, name: 'summary' };
    /** What the last reconcile read: the names of the labelled ConfigMaps, sorted. */
    let reconciled: string[] | undefined;
    controllerFor(mgr, Secrets)
      .named('labelled-configmaps')
      .owns(ConfigMaps)
      .watches(ConfigMaps, () => [summary], { selector: { labelSelector: SELECTOR } })
      .complete(async (req, ctx) => {
        if (req.name !== summary.name) return {};
        const labelled = await mgr.cache.list(ConfigMaps, {
          namespace: ns,
          labelSelector: SELECTOR,
          signal: ctx.signal,
        });
        reconciled = labelled.map((cm) => cm.metadata.name ?? '').sort();
        return {};
      });
    const ac = new AbortController();
    const run = mgr.start({ signal: ac.signal, handleSignals: false });
    try {
      const names = ['cm-0', 'cm-1', 'cm-2', 'cm-3'];
      const exists = new Set<string>();
      const expectApiState = async (step: string): Promise<void> => {
        const api = await rest.list(ConfigMaps, { namespace: ns, labelSelector: SELECTOR });
        const want = api.items.map((cm) => cm.metadata.name ?? '').sort();
        await eventually(
          `the reconciler to read ${JSON.stringify(want)} after ${step} (last read: ${JSON.stringify(reconciled)})`,
          () => JSON.stringify(reconciled) === JSON.stringify(want),
          { timeoutMs: 20_000 },
        );
      };
      // Creating a labelled ConfigMap wakes the reconciler; from then on, every change must show.
      await rest.create(ConfigMaps, { metadata: { namespace: ns, name: 'seed', labels: { [LABEL]: 'a' } } });
      await expectApiState('creating seed');
      for (let round = 0; round < 6; round++) {
        for (const name of names) {
          let step: string;
          if (!exists.has(name)) {
            await rest.create(ConfigMaps, { metadata: { namespace: ns, name, labels: { [LABEL]: 'a' } } });
            exists.add(name);
            step = `creating ${name} labelled`;
          } else if (round % 3 === 1) {
            await rest.patch(
              ConfigMaps,
              { namespace: ns, name },
              { type: 'merge', body: { metadata: { labels: { [LABEL]: null } } } },
            );
            step = `unlabelling ${name}`;
          } else if (round % 3 === 2) {
            await rest.patch(
              ConfigMaps,
              { namespace: ns, name },
              { type: 'merge', body: { metadata: { labels: { [LABEL]: 'a' } } } },
            );
            step = `labelling ${name} again`;
          } else {
            await rest.delete(ConfigMaps, { namespace: ns, name });
            exists.delete(name);
            step = `deleting ${name}`;
          }
          await expectApiState(`${step} (round ${round})`);
        }
      }
      assert.ok(reconciled !== undefined);
    } finally {
      ac.abort();
      await run;
      client.close();
    }
  });

  test('the label-selector parser accepts exactly what the API server accepts', async () => {
    const selectors = [
      'a=1',
      'a==1,b!=2',
      'a in (x, y),b notin (z)',
      'a in ()',
      'a in (,x)',
      'a,!b',
      'a>3,b<007',
      'a>-1',
      'a>9223372036854775808',
      'a<9223372036854775807',
      'a>x',
      'a>',
      'a=',
      'in=notin',
      'a in(x)',
      'example.com/a=1',
      'Example.com/a=1',
      '/a=1',
      'a/b/c=1',
      'A_b.C-d=E_f.G-h',
      `${'x'.repeat(63)}=1`,
      `${'x'.repeat(64)}=1`,
      `a=${'x'.repeat(64)}`,
      `${'x'.repeat(254)}/a=1`,
      'a=-x',
      '!a=1',
      'a in (x',
      'a b',
      'a,',
      ',a',
      'a=1 b=2',
      'a=(x)',
      '-a=1',
    ];
    const disagreements: string[] = [];
    for (const selector of selectors) {
      let server = true;
      try {
        await rest.list(ConfigMaps, { namespace: 'default', labelSelector: selector });
      } catch (err) {
        if (!(err instanceof BadRequestError)) throw err;
        server = false;
      }
      let ours = true;
      try {
        parseLabelSelector(selector);
      } catch (err) {
        if (!(err instanceof SelectorParseError)) throw err;
        ours = false;
      }
      if (server !== ours) disagreements.push(`${selector}: API server ${server}, opkit ${ours}`);
    }
    assert.deepEqual(disagreements, []);
  });

  test('the field-selector parser accepts what the API server accepts', async () => {
    // Keys the API server supports for ConfigMaps; the rest of the grammar is the same for every kind.
    const selectors = [
      'metadata.name=a',
      'metadata.name==a,metadata.namespace!=b',
      'metadata.name=',
      'metadata.name=a,,metadata.namespace=default',
      'metadata.name=a\\,b',
      'metadata.name=a\\=b',
      'metadata.name=a\\\\',
      'metadata.name=a=b',
      'metadata.name=a\\',
      'metadata.name=a\\x',
      'metadata.name = a',
      'metadata.name',
      '=a',
      ' ',
    ];
    const disagreements: string[] = [];
    for (const selector of selectors) {
      let server = true;
      try {
        await rest.list(ConfigMaps, { namespace: 'default', fieldSelector: selector });
      } catch (err) {
        if (!(err instanceof BadRequestError)) throw err;
        server = false;
      }
      let ours = true;
      try {
        parseFieldSelector(selector);
      } catch (err) {
        if (!(err instanceof SelectorParseError)) throw err;
        ours = false;
      }
      if (server !== ours) disagreements.push(`${selector}: API server ${server}, opkit ${ours}`);
    }
    assert.deepEqual(disagreements, []);
  });
});
