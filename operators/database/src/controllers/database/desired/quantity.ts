/** Quantity arithmetic lives in the runtime; re-exported for the builders. */
export { compareQuantities, MiB, parseQuantity } from '@opkit/runtime';
