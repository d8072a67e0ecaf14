/**
 * The Database controller: what it watches and how events map to Databases.
 *
 *   Database            its own events; updates only when the spec (generation) changed or deletion began
 *   StatefulSet, Service, ConfigMap, PodDisruptionBudget
 *                       owned children: any change (status too) reconciles the controlling Database, so
 *                       drift is repaired and readiness reaches the status
 *   Secret              mapped by the app.kubernetes.io/instance label: under deletionPolicy Retain the
 *                       credentials Secret has no ownerReference (it stays with the data), so it cannot
 *                       be mapped through one
 *   Pod                 mapped to its Database by the app.kubernetes.io/instance label (pods are owned by
 *                       the StatefulSet, not the Database): readiness and role labels
 *   PersistentVolumeClaim  same mapping: expansion progress
 *   Node                cordoned or Ready changed: the Databases with a pod on it
 *   Lease (kube-node-lease only, with pods/exec)  the nodes' heartbeats: remembered per node, never a
 *                       reconcile per renewal; a node whose kubelet goes silent wakes the Databases with a
 *                       pod on it (failover/node-heartbeat-io.ts)
 *
 * Every child informer is restricted to the objects the operator manages (label
 * app.kubernetes.io/managed-by=opkit-database-operator), so the operator never caches the cluster's
 * other Secrets, pods or claims.
 *
 * `rbac` is what the operator may do: `opkit generate` turns it into config/rbac/role.yaml (and
 * scripts/generate.ts into the chart's RBAC). The restart integration test runs the operator with exactly
 * that role, and test/unit/database.test.ts checks that every request the controller makes is covered.
 */
import type { RbacRule } from '@opkit/cli/rbac';
import {
  ConfigMaps,
  type Controller,
  controllerFor,
  type EventHandler,
  type EventObject,
  Events,
  generationChanged,
  type KubeObject,
  Leases,
  type Manager,
  type Node,
  Nodes,
  or,
  type PersistentVolumeClaim,
  PersistentVolumeClaims,
  type Pod,
  PodDisruptionBudgets,
  type PodExecutor,
  Pods,
  type Predicate,
  type Request,
  type RequestSink,
  type Resource,
  RoleBindings,
  Roles,
  Secrets,
  ServiceAccounts,
  Services,
  StatefulSets,
} from '@opkit/runtime';
import {
  ANNOTATION_SWITCHOVER_TO,
  type Database,
  Databases,
  LABEL_INSTANCE,
  LABEL_MANAGED_BY,
  MANAGED_BY,
} from '../../api/v1/database.ts';
import { newLeaseMemory } from './failover/lease-io.ts';
import { FailoverMetrics } from './failover/metrics.ts';
import { NODE_LEASE_NAMESPACE } from './failover/node-heartbeat.ts';
import { NodeHeartbeats } from './failover/node-heartbeat-io.ts';
import { cacheReader, databaseReconciler, MANAGED_SELECTOR } from './reconcile.ts';
import { DEFAULT_REPLICATION_POLL_MS, ReplicationPoller } from './replication-poll.ts';

export const CONTROLLER_NAME = 'database';
/** reportingController of the operator's Events. */
export const EVENT_SOURCE = 'myapp.example.com/database-operator';

/** The kinds the operator caches, each restricted to the objects it manages. */
export const MANAGED_KINDS: readonly Resource[] = [
  StatefulSets,
  Services,
  Secrets,
  ConfigMaps,
  PodDisruptionBudgets,
  Pods,
  PersistentVolumeClaims,
  ServiceAccounts,
  Roles,
  RoleBindings,
] as Resource[];

/**
 * Least privilege: exactly the verbs and resources the operator uses, no wildcards. Reads go through the
 * cache (list and watch, restricted to managed objects) and, for a few reads that must be fresh, get.
 */
export const rbac: RbacRule[] = [
  // The primary resource: read and watch it, add/remove its finalizer (JSON patch).
  { resource: Databases.resource, verbs: ['get', 'list', 'watch', 'patch'] },
  // Status is written with merge patches only.
  { resource: Databases.resource, subresource: 'status', verbs: ['patch'] },
  // Children carry ownerReferences with blockOwnerDeletion, which needs update on the owner's finalizers.
  { resource: Databases.resource, subresource: 'finalizers', verbs: ['update'] },
  // StatefulSet: created, updated, recreated with orphan deletion (storage growth), deleted by the
  // Delete policy's finalizer.
  { resource: StatefulSets, verbs: ['get', 'list', 'watch', 'create', 'update', 'delete'] },
  // Services (headless, read-write, read-only; the read-only one is deleted when replicas goes to 1).
  { resource: Services, verbs: ['get', 'list', 'watch', 'create', 'update', 'delete'] },
  // The credentials Secret: created once, then only missing keys are added and its ownerReferences follow
  // the deletionPolicy (patch). Never updated whole, never deleted by the operator.
  { resource: Secrets, verbs: ['get', 'list', 'watch', 'create', 'patch'] },
  { resource: ConfigMaps, verbs: ['get', 'list', 'watch', 'create', 'update'] },
  // PodDisruptionBudget when replicas > 1, deleted when replicas goes to 1.
  { resource: PodDisruptionBudgets, verbs: ['get', 'list', 'watch', 'create', 'update', 'delete'] },
  // Role labels (primary / replica) on the database pods; readiness for the status; postgres: a pod on an
  // old revision deleted so that it is recreated on the new one (replicas first, the primary last).
  { resource: Pods, verbs: ['get', 'list', 'watch', 'patch', 'delete'] },
  // Failover (postgres): fence, query, promote and restart the instances through their server container.
  // (get too: API servers before Kubernetes 1.35 authorize the exec upgrade as a get.)
  { resource: Pods, subresource: 'exec', verbs: ['get', 'create'] },
  // Failover: whether the primary's node is NotReady or cordoned (a switchover before the drain); watched
  // so that a cordon (which changes no pod) reaches the Databases with pods on the node.
  { resource: Nodes, verbs: ['get', 'list', 'watch'] },
  // Volume expansion (patch the request) and the Delete policy (delete the claims).
  { resource: PersistentVolumeClaims, verbs: ['get', 'list', 'watch', 'patch', 'delete'] },
  // postgres, the primary lease (desired/lease.ts): the instances' ServiceAccount, Role and RoleBinding
  // (created and kept; gone with the Database by garbage collection). Creating a Role needs every
  // permission it grants (RBAC escalation prevention): get and patch on leases, below.
  { resource: ServiceAccounts, verbs: ['get', 'list', 'watch', 'create', 'update'] },
  { resource: Roles, verbs: ['get', 'list', 'watch', 'create', 'update'] },
  { resource: RoleBindings, verbs: ['get', 'list', 'watch', 'create', 'update'] },
  // The Lease `<name>-primary`: read fresh (get; never watched: its holder renews it every 2 s), created,
  // its holder written (update); patch only because the instances' Role grants it. list and watch: the
  // nodes' Leases in kube-node-lease (their heartbeats, failover/node-heartbeat-io.ts; that namespace
  // only, but a ClusterRole cannot say so).
  { resource: Leases, verbs: ['get', 'list', 'watch', 'create', 'update', 'patch'] },
  // Events about Databases (events.k8s.io/v1, with series updates).
  { resource: Events, verbs: ['create', 'patch'] },
];

export interface DatabaseControllerOptions {
  /** Databases reconciled in parallel (default 2). */
  maxConcurrentReconciles?: number;
  /** pods/exec, for the failover of postgres Databases; without it the operator never fails over. */
  exec?: PodExecutor;
  /** How often the primary of a postgres Database is asked about its replicas, ms (default 30 s; 0 never). */
  replicationPollMs?: number;
}

/** A managed object to the Database named by its instance label (pods and PVCs are not owned by it). */
export function databaseOf(obj: EventObject): Request[] {
  const labels = obj.metadata.labels;
  const name = labels?.[LABEL_INSTANCE];
  if (!name || labels?.[LABEL_MANAGED_BY] !== MANAGED_BY || !obj.metadata.namespace) return [];
  return [{ namespace: obj.metadata.namespace, name }];
}

/**
 * Update events of the Database pass when the spec changed, deletion started or a switchover was asked
 * for (the switchover-to annotation; metadata changes do not move the generation), not status writes.
 */
export function databasePredicate(): Predicate<Database> {
  return or<Database>(generationChanged<Database>(), {
    update: (o, n) =>
      o.metadata.deletionTimestamp !== n.metadata.deletionTimestamp ||
      o.metadata.annotations?.[ANNOTATION_SWITCHOVER_TO] !==
        n.metadata.annotations?.[ANNOTATION_SWITCHOVER_TO],
  });
}

function podReady(pod: EventObject<Pod>): string | undefined {
  return pod.status?.conditions?.find((c) => c.type === 'Ready')?.status;
}

/** Pod updates that matter: labels (role), readiness, phase, deletion. */
export function podPredicate(): Predicate<Pod> {
  return {
    update: (o, n) =>
      JSON.stringify(o.metadata.labels ?? {}) !== JSON.stringify(n.metadata.labels ?? {}) ||
      podReady(o) !== podReady(n) ||
      o.status?.phase !== n.status?.phase ||
      o.metadata.deletionTimestamp !== n.metadata.deletionTimestamp,
  };
}

/** Node updates that matter to a failover: cordoned or not, Ready or not. */
export function nodePredicate(): Predicate<Node> {
  const view = (n: EventObject<Node>) =>
    JSON.stringify([
      n.spec?.unschedulable ?? false,
      n.status?.conditions?.find((c) => c.type === 'Ready')?.status,
    ]);
  return { create: () => false, delete: () => false, update: (o, n) => view(o) !== view(n) };
}

/**
 * A node's events to the Databases with a pod on it (a cordon or a NotReady node changes no pod at
 * first). The pods come from the cache (managed pods only), asynchronously: the sink is the queue.
 */
export function nodeHandler(pods: ManagedPods): EventHandler<Node> {
  const each = (node: EventObject<Node>, sink: RequestSink): void =>
    wakeDatabasesOn(pods, node.metadata.name ?? '', sink);
  return { create: each, update: (_o, n, sink) => each(n, sink), delete: each, generic: each };
}

/** The cache of managed pods, as the node mappings read it. */
export interface ManagedPods {
  list(res: typeof Pods, opts: Record<string, never>): Promise<unknown[]>;
}

/** Adds the Databases with a pod on `node` to `sink`, asynchronously (the pods from the cache). */
export function wakeDatabasesOn(pods: ManagedPods, node: string, sink: RequestSink): void {
  void pods.list(Pods, {}).then(
    (all) => {
      for (const p of all as Pod[]) {
        if (p.spec?.nodeName === node) for (const r of databaseOf(p)) sink.add(r);
      }
    },
    () => {},
  );
}

/** PVC updates that matter: the requested size, the capacity, the phase, resize conditions, deletion. */
export function claimPredicate(): Predicate<PersistentVolumeClaim> {
  const view = (c: EventObject<PersistentVolumeClaim>) =>
    JSON.stringify([
      c.spec?.resources?.requests?.storage,
      c.status?.capacity?.storage,
      c.status?.phase,
      c.status?.conditions?.map((x) => [x.type, x.status]),
      c.metadata.deletionTimestamp,
    ]);
  return { update: (o, n) => view(o) !== view(n) };
}

/**
 * Registers the controller with the manager (call before mgr.start()). Restricts the child informers
 * to managed objects first, so every read and watch of the operator goes through those.
 */
export function setupDatabaseController(
  mgr: Manager,
  opts: DatabaseControllerOptions = {},
): Controller<Database> {
  for (const kind of MANAGED_KINDS) {
    mgr.cache.configure(kind as Resource<KubeObject>, { labelSelector: MANAGED_SELECTOR });
  }
  const failoverMetrics = opts.exec ? new FailoverMetrics(mgr.metrics.registry) : undefined;
  // The nodes' heartbeats matter only to the failover (which needs exec).
  const heartbeats = opts.exec ? new NodeHeartbeats() : undefined;
  const pods = mgr.cache as ManagedPods;
  // The replication poll wakes a Database's reconcile when its primary's answer changed what the status shows.
  let controller: Controller<Database> | undefined;
  const poll = opts.replicationPollMs ?? DEFAULT_REPLICATION_POLL_MS;
  const reconciler = databaseReconciler({
    client: mgr.client,
    reader: cacheReader(mgr.cache),
    recorder: mgr.getEventRecorder(EVENT_SOURCE),
    leases: newLeaseMemory(),
    ...(heartbeats ? { heartbeats } : {}),
    ...(opts.exec ? { exec: opts.exec, failoverMetrics } : {}),
    ...(opts.exec && poll > 0
      ? {
          replication: new ReplicationPoller({
            exec: opts.exec,
            metrics: failoverMetrics,
            intervalMs: poll,
            wake: (namespace, name) => controller?.enqueue({ namespace, name }),
          }),
        }
      : {}),
  });
  const builder = controllerFor(mgr, Databases.resource)
    .named(CONTROLLER_NAME)
    .withPredicates(databasePredicate())
    .owns(StatefulSets)
    .owns(Services)
    .watches(Secrets, databaseOf)
    .owns(ConfigMaps)
    .owns(PodDisruptionBudgets)
    .owns(ServiceAccounts)
    .owns(Roles)
    .owns(RoleBindings)
    .watches(Pods, databaseOf, { predicates: [podPredicate()] })
    .watches(PersistentVolumeClaims, databaseOf, { predicates: [claimPredicate()] })
    .watches(Nodes, nodeHandler(pods), {
      predicates: [nodePredicate()],
    });
  if (heartbeats) {
    builder.watches(
      Leases,
      heartbeats.handler((node, sink) => wakeDatabasesOn(pods, node, sink)),
      { selector: { namespace: NODE_LEASE_NAMESPACE } },
    );
  }
  controller = builder
    .withOptions({ maxConcurrentReconciles: opts.maxConcurrentReconciles ?? 2 })
    .complete(reconciler);
  return controller;
}
