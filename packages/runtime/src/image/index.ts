/** @opkit/runtime/image: what an operator's image is built with (Node's compile cache, warmed). */
export {
  CompileCacheError,
  type WarmCompileCacheOptions,
  type WarmedCompileCache,
  warmCompileCache,
} from './compile-cache.ts';
