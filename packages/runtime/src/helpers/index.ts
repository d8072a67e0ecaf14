/** Reconcile helpers: owner references, conditions, finalizers, status, createOrUpdate/apply, events. */
export * from './conditions.ts';
export * from './create-or-update.ts';
export * from './equality.ts';
export * from './events.ts';
export * from './finalizers.ts';
export * from './owner.ts';
export * from './status.ts';
