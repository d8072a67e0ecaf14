/**
 * Services: `<name>-headless` gives every pod a stable DNS name (`<name>-N.<name>-headless`, used by
 * replicas to reach the primary) and publishes not-ready pods, since a replica must reach a primary that
 * is not Ready yet; `<name>` selects the primary (role label), `<name>-ro` the replicas (only when there
 * are any).
 */
import type { Service } from '@opkit/runtime';
import type { Database, DefaultedDatabase } from '../../../api/v1/database.ts';
import { engineFor } from '../engines/index.ts';
import { withDefaults } from './defaults.ts';
import { commonLabels, primarySelector, replicaSelector, selectorLabels } from './labels.ts';
import { childNames } from './names.ts';

function ports(d: DefaultedDatabase): NonNullable<Service['spec']>['ports'] {
  const e = engineFor(d.spec.engine);
  return [{ name: e.portName, port: e.port, targetPort: e.portName, protocol: 'TCP' }];
}

function service(
  d: DefaultedDatabase,
  name: string,
  component: string,
  spec: NonNullable<Service['spec']>,
): Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: d.metadata.namespace, labels: commonLabels(d, component) },
    spec: { ...spec, ports: ports(d) },
  };
}

export function headlessService(db: Database | DefaultedDatabase): Service {
  const d = withDefaults(db);
  return service(d, childNames(d).headless, 'headless', {
    type: 'ClusterIP',
    clusterIP: 'None',
    publishNotReadyAddresses: true,
    selector: selectorLabels(d),
  });
}

export function readWriteService(db: Database | DefaultedDatabase): Service {
  const d = withDefaults(db);
  return service(d, childNames(d).readWrite, 'read-write', {
    type: d.spec.serviceType,
    selector: primarySelector(d),
  });
}

/** Only when replicas > 1; undefined otherwise (the reconciler deletes a leftover one). */
export function readOnlyService(db: Database | DefaultedDatabase): Service | undefined {
  const d = withDefaults(db);
  if (d.spec.replicas <= 1) return undefined;
  return service(d, childNames(d).readOnly, 'read-only', {
    type: d.spec.serviceType,
    selector: replicaSelector(d),
  });
}
