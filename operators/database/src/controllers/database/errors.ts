/** The failures of a reconcile step: which are terminal (no retry until something changes) and their reasons. */
import {
  AlreadyOwnedError,
  BadRequestError,
  InvalidError,
  InvalidOwnerError,
  type KubeObject,
  type PersistentVolumeClaim,
} from '@opkit/runtime';
import type { Database } from '../../api/v1/database.ts';
import { adoptionLabels, ObjectConflictError } from './ownership.ts';

/**
 * The credentials Secret is missing while the Database's data volumes exist: their data was initialized
 * with the passwords it held, so generating new ones would lock every client out.
 */
export class CredentialsMissingError extends Error {
  readonly claims: PersistentVolumeClaim[];
  constructor(secret: string, namespace: string, db: Database, claims: PersistentVolumeClaim[]) {
    const names = claims.map((c) => c.metadata.name ?? '').join(', ');
    super(
      `Secret ${namespace}/${secret} is missing, but the data volumes of this Database exist (${names}). ` +
        'Their data was initialized with the passwords in that Secret, so the operator does not generate ' +
        `new ones (they would lock every client out). Restore Secret ${secret} from a backup, with its ` +
        `labels (${adoptionLabels(db)}); or, to start over with empty data, delete the ` +
        `PersistentVolumeClaims ${names}.`,
    );
    this.name = 'CredentialsMissingError';
    this.claims = claims;
  }
}

/** spec.image cannot run spec.version: nothing is rolled out until the spec is fixed. */
export class ImageVersionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ImageVersionError';
  }
}

/** A child write the API refused; `terminal` when retrying cannot help. */
export class ChildError extends Error {
  readonly kind: string;
  readonly childName: string;
  readonly terminal: boolean;
  readonly reason: string;
  /** The object the failure is about, for the Warning event's `related` (a conflicting object). */
  readonly related: KubeObject | undefined;
  constructor(kind: string, childName: string, cause: unknown) {
    const message = cause instanceof Error ? cause.message : String(cause);
    // These name the object themselves.
    const named =
      cause instanceof ObjectConflictError ||
      cause instanceof CredentialsMissingError ||
      cause instanceof ImageVersionError;
    super(named ? message : `${kind} ${childName}: ${message}`, { cause });
    this.name = 'ChildError';
    this.kind = kind;
    this.childName = childName;
    this.terminal =
      cause instanceof InvalidError ||
      cause instanceof BadRequestError ||
      cause instanceof AlreadyOwnedError ||
      cause instanceof InvalidOwnerError ||
      cause instanceof ObjectConflictError ||
      cause instanceof CredentialsMissingError ||
      cause instanceof ImageVersionError;
    this.reason =
      cause instanceof CredentialsMissingError
        ? 'CredentialsMissing'
        : cause instanceof ImageVersionError
          ? 'ImageVersionMismatch'
          : cause instanceof AlreadyOwnedError ||
              cause instanceof InvalidOwnerError ||
              cause instanceof ObjectConflictError
            ? `${kind}NotOwned`
            : cause instanceof InvalidError || cause instanceof BadRequestError
              ? `Invalid${kind}`
              : `${kind}Failed`;
    this.related =
      cause instanceof ObjectConflictError
        ? cause.object
        : cause instanceof CredentialsMissingError
          ? cause.claims[0]
          : undefined;
  }
}
