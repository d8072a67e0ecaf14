/**
 * A field of desired state the live object must not keep: createOrUpdate's merge removes a key whose
 * desired value is `null` (JSON merge patch's "remove"), and its comparison takes a missing field as
 * equal. Typed as `undefined` so it fits the optional fields of the API types.
 */
export const REMOVED = null as unknown as undefined;
