/** Pod exec: run a command in a pod's container through the API server (the pods/exec subresource). */
export {
  ContainerNotFoundError,
  ContainerNotRunningError,
  type ExecOutcome,
  ExecTimeoutError,
  execErrorFromStatus,
  execRbacHint,
  NodeUnreachableError,
  parseExecStatus,
} from './errors.ts';
export { newPodExecutor, type PodExecutorOptions } from './executor.ts';
export {
  BoundedOutput,
  decodeFrame,
  EXEC_PROTOCOLS,
  execPath,
  type Frame,
  stdinFrames,
  V4_PROTOCOL,
  V5_PROTOCOL,
} from './protocol.ts';
export type { ExecOptions, ExecResult, ExecTarget, PodExecutor } from './types.ts';
