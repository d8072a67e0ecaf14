/**
 * The primary lease, the operator's side (pure; the I/O is in lease-io.ts). The Lease `<name>-primary`
 * names the designated primary (holderIdentity, written by the operator only); the primary's sidecar
 * renews it (renewTime) and fences itself when it cannot (engines/postgres/lease.ts).
 *
 * The operator never compares the sidecar's clock with its own (as client-go's leader election): it
 * remembers, by ITS OWN monotonic clock, when it last saw the Lease change (a new resourceVersion that it
 * did not write itself). From that:
 *   - a primary whose Lease has not changed for LEASE + MARGIN is lost (PrimaryLeaseExpired), without
 *     waiting for its node to become NotReady;
 *   - when fencing by exec failed (the kubelet of the primary's node is dead), the former primary may be
 *     taken for fenced, and a replica promoted, once LEASE + MARGIN passed since that last change, or at
 *     once when the sidecar acknowledged its fence on the Lease (the fenced annotation, written after it
 *     stopped the server, on the Lease version in which the operator had cleared the holder).
 * Safety: the sidecar's last successful renewal happened before the operator observed the change it made
 * (the operator's own writes carry the resourceVersion they read, so a renewal the operator did not see
 * makes its write fail with a conflict, and it reads again); the sidecar starts fencing at most LEASE after
 * that renewal (it fences LEASE_SLACK before, to cover its interval and a request's timeout), and the
 * fence (a fast shutdown bounded at 3 s, then an immediate one) takes less than MARGIN; the operator acts
 * at least LEASE + MARGIN after its observation. Assumed: the node's and the operator's monotonic clocks
 * run at about the same rate (no NTP in it), and a stopped server is not started as a primary again
 * (instance.sh waits on the `none` designation the sidecar writes first).
 * After an operator restart there is no observation: the first look counts as the last change (it waits
 * the full LEASE + MARGIN: safe).
 * A Lease whose holder never renewed it (no renewTime: kwok pods, an image without curl, a sidecar that
 * does not run) never makes a primary lost, and never makes the operator wait: it falls back to the node
 * and pod conditions (decide.ts) and to exec fencing.
 */
import type { Lease } from '@opkit/runtime';
import { LEASE_FENCED_ANNOTATION, LEASE_OFF_ANNOTATION } from '../engines/postgres/lease.ts';

/** Seconds the operator adds to the lease before it takes a silent primary for fenced. */
export const PRIMARY_LEASE_MARGIN_SECONDS = 5;

/** What the operator saw of a Lease: its version and when (its own monotonic clock, ms). */
export interface LeaseObservation {
  resourceVersion: string;
  /** When the operator first saw this version (or, for its own write, when it saw the one before). */
  since: number;
}

/** The observation after reading `lease` at `now`: a new version resets the time, the same one keeps it. */
export function observeLease(
  prev: LeaseObservation | undefined,
  lease: Lease | undefined,
  now: number,
): LeaseObservation | undefined {
  const rv = lease?.metadata.resourceVersion;
  if (!rv) return undefined;
  if (prev && prev.resourceVersion === rv) return prev;
  return { resourceVersion: rv, since: now };
}

/** After the operator's own write: the new version, the time of the last change it did not make. */
export function afterOwnWrite(
  prev: LeaseObservation | undefined,
  written: Lease,
  now: number,
): LeaseObservation | undefined {
  const rv = written.metadata.resourceVersion;
  if (!rv) return prev;
  return { resourceVersion: rv, since: prev?.since ?? now };
}

/** The holder renewed the Lease at least once since the operator named it (renewTime is set). */
export function leaseRenewed(lease: Lease | undefined): boolean {
  return Boolean(lease?.spec?.renewTime);
}

/** The sidecar of `pod` acknowledged its fence on the Lease (after the holder was cleared). */
export function fenceAcknowledged(lease: Lease | undefined, pod: string): boolean {
  return (
    !lease?.spec?.holderIdentity &&
    lease?.metadata.annotations?.[LEASE_FENCED_ANNOTATION] === pod &&
    pod !== ''
  );
}

export interface LeaseVerdictInput {
  lease: Lease | undefined;
  observation: LeaseObservation | undefined;
  now: number;
  /** spec.primaryLeaseSeconds in ms. */
  leaseMs: number;
  marginMs?: number;
}

/** How long (ms) since the Lease last changed, and how long until LEASE + MARGIN is reached. */
function silence(input: LeaseVerdictInput): { silentMs: number; remainingMs: number; limitMs: number } {
  const limitMs = input.leaseMs + (input.marginMs ?? PRIMARY_LEASE_MARGIN_SECONDS * 1000);
  const since = input.observation?.since ?? input.now;
  const silentMs = Math.max(0, input.now - since);
  return { silentMs, remainingMs: Math.max(0, limitMs - silentMs), limitMs };
}

export type PrimaryLeaseState =
  /** The lease says nothing about this primary (never renewed by it, another holder, no Lease). */
  { kind: 'unknown' } | { kind: 'held'; recheckMs: number } | { kind: 'expired'; silentMs: number };

/** Is the designated primary still renewing its Lease? */
export function primaryLeaseState(input: LeaseVerdictInput & { primary: string }): PrimaryLeaseState {
  const { lease } = input;
  if (!lease || lease.spec?.holderIdentity !== input.primary || !leaseRenewed(lease)) {
    return { kind: 'unknown' };
  }
  const s = silence(input);
  if (s.remainingMs > 0) return { kind: 'held', recheckMs: s.remainingMs };
  return { kind: 'expired', silentMs: s.silentMs };
}

export type FenceByLease =
  /** The lease cannot vouch for the former primary: fence it otherwise (exec, node NotReady). */
  { kind: 'unknown' } | { kind: 'wait'; afterMs: number; message: string } | { kind: 'fenced'; why: string };

/**
 * Whether the former primary `from` has fenced itself, by the Lease (its holder was cleared by the
 * operator when the failover started): the sidecar said so, or LEASE + MARGIN passed since the Lease last
 * changed. 'unknown' when its sidecar never renewed it (renewTime kept when the holder is cleared).
 */
export function fencedByLease(input: LeaseVerdictInput & { from: string }): FenceByLease {
  const { lease } = input;
  if (!lease || !leaseRenewed(lease)) return { kind: 'unknown' };
  if (fenceAcknowledged(lease, input.from)) {
    return { kind: 'fenced', why: `${input.from} fenced itself (acknowledged on its Lease)` };
  }
  const s = silence(input);
  if (s.remainingMs === 0) {
    return {
      kind: 'fenced',
      why: `${input.from}'s Lease has not changed for ${Math.round(s.silentMs / 1000)}s: it has fenced itself (it stops when it cannot renew)`,
    };
  }
  return {
    kind: 'wait',
    afterMs: s.remainingMs,
    message: `waiting until ${input.from}'s Lease has not changed for ${Math.round(s.limitMs / 1000)}s (its sidecar stops it when it cannot renew)`,
  };
}

/**
 * The Lease naming `holder`: unchanged when it already does; else the holder, no renewTime (nobody
 * renewed for the new holder), the fenced acknowledgement removed. Clearing the holder ('') keeps the
 * renewTime (it tells that the former holder's sidecar ran: fencedByLease counts on it). Not `guarded`
 * (one instance: nothing fails over to, so a primary that loses the API server must not stop): the off
 * annotation, which the sidecar reads as "neither renew nor fence".
 */
export function leaseWithHolder(
  lease: Lease,
  holder: string,
  leaseSeconds: number,
  guarded = true,
): Lease | undefined {
  const current = lease.spec?.holderIdentity ?? '';
  const duration = lease.spec?.leaseDurationSeconds;
  const off = lease.metadata.annotations?.[LEASE_OFF_ANNOTATION] === 'true';
  if (current === holder && duration === leaseSeconds && off === !guarded) return undefined;
  const next = structuredClone(lease);
  const annotations = { ...(next.metadata.annotations ?? {}) };
  if (current !== holder) delete annotations[LEASE_FENCED_ANNOTATION];
  if (guarded) delete annotations[LEASE_OFF_ANNOTATION];
  else annotations[LEASE_OFF_ANNOTATION] = 'true';
  next.metadata.annotations = annotations;
  const spec = { ...(next.spec ?? {}) };
  spec.leaseDurationSeconds = leaseSeconds;
  if (current !== holder) {
    if (holder === '') {
      delete spec.holderIdentity;
    } else {
      spec.holderIdentity = holder;
      delete spec.renewTime;
      spec.leaseTransitions = (spec.leaseTransitions ?? 0) + 1;
    }
  }
  next.spec = spec;
  return next;
}
