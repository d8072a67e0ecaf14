/**
 * Pure desired-state builders: a Database in, the objects it should own out. No I/O, no clock, no
 * randomness except the Secret's passwords (injectable). Every object carries the operator's labels and
 * NO ownerReferences: the reconciler sets the controller reference. No secret value is anywhere but the
 * Secret.
 */
import type { ConfigMap, PodDisruptionBudget, Secret, Service, StatefulSet } from '@opkit/runtime';
import type { Database, DefaultedDatabase } from '../../../api/v1/database.ts';
import { configHash, configMap } from './config.ts';
import { withDefaults } from './defaults.ts';
import { type Endpoints, endpoints } from './endpoints.ts';
import { selectorString } from './labels.ts';
import { type ChildNames, childNames } from './names.ts';
import { podDisruptionBudget } from './pdb.ts';
import { credentialsSecret, type RandomSource } from './secret.ts';
import { headlessService, readOnlyService, readWriteService } from './services.ts';
import { statefulSet } from './statefulset.ts';

export interface DesiredChildrenOptions {
  /** The live credentials Secret, if there is one: then only its missing keys are returned. */
  existingSecret?: Secret | undefined;
  random?: RandomSource;
  clusterDomain?: string;
}

export interface DesiredChildren {
  names: ChildNames;
  /** The Secret to create; with existingSecret, the missing keys to merge, or undefined (nothing to do). */
  secret: Secret | undefined;
  configMap: ConfigMap;
  configHash: string;
  headlessService: Service;
  readWriteService: Service;
  /** undefined with one replica: a leftover `<name>-ro` should be deleted. */
  readOnlyService: Service | undefined;
  statefulSet: StatefulSet;
  /** undefined with one replica: a leftover PDB should be deleted. */
  podDisruptionBudget: PodDisruptionBudget | undefined;
  /** For status.endpoints. */
  endpoints: Endpoints;
  /** For status.selector. */
  selector: string;
}

export function desiredChildren(
  db: Database | DefaultedDatabase,
  opts: DesiredChildrenOptions = {},
): DesiredChildren {
  const d = withDefaults(db);
  const cm = configMap(d);
  const hash = configHash(cm);
  return {
    names: childNames(d),
    secret: credentialsSecret(d, opts.existingSecret, opts.random),
    configMap: cm,
    configHash: hash,
    headlessService: headlessService(d),
    readWriteService: readWriteService(d),
    readOnlyService: readOnlyService(d),
    statefulSet: statefulSet(d, { configHash: hash }),
    podDisruptionBudget: podDisruptionBudget(d),
    endpoints: endpoints(d, opts.clusterDomain),
    selector: selectorString(d),
  };
}

export { configHash, configMap } from './config.ts';
export { primaryLeaseSeconds, withDefaults } from './defaults.ts';
export { DEFAULT_CLUSTER_DOMAIN, type Endpoints, endpoints } from './endpoints.ts';
export * from './labels.ts';
export {
  instanceRole,
  instanceRoleBinding,
  instanceServiceAccount,
  primaryLease,
  usesPrimaryLease,
} from './lease.ts';
export * from './names.ts';
export { podDisruptionBudget, primaryDisruptionBudget } from './pdb.ts';
export { compareQuantities, parseQuantity } from './quantity.ts';
export {
  credentialsSecret,
  cryptoRandom,
  generatePassword,
  missingPasswordKeys,
  PASSWORD_ALPHABET,
  PASSWORD_LENGTH,
  type RandomSource,
} from './secret.ts';
export { headlessService, readOnlyService, readWriteService } from './services.ts';
export {
  containerResources,
  containerSecurityContext,
  DEFAULT_RESOURCES,
  type StatefulSetOptions,
  statefulSet,
} from './statefulset.ts';
