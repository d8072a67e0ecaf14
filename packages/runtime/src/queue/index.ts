export type {
  BucketRateLimiterOptions,
  DefaultControllerRateLimiterOptions,
  RateLimiter,
} from './rate-limiter.ts';
export {
  BucketRateLimiter,
  defaultControllerRateLimiter,
  ItemExponentialFailureRateLimiter,
  MaxOfRateLimiter,
} from './rate-limiter.ts';
export type { WorkQueueMetrics, WorkQueueOptions } from './work-queue.ts';
export { WorkQueue } from './work-queue.ts';
