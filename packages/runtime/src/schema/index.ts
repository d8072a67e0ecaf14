/**
 * One source of truth for custom resources: write the schema once with `s`, get the TypeScript type
 * (`Infer`, `TypeOf`), the CRD's structural openAPIV3Schema (`toOpenAPI`, `defineCustomResource().crd()`)
 * and client-side validation and defaulting (`validate`, `applyDefaults`).
 */
export * from './custom-resource.ts';
export * from './openapi.ts';
export * from './s.ts';
export * from './types.ts';
export * from './validate.ts';
