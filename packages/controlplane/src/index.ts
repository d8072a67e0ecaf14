export { type ClusterCommandOptions, runClusterCommand } from './cli/cluster-command.ts';
export {
  type ClusterStatus,
  clusterDown,
  clusterStatus,
  clusterUp,
  runningCluster,
} from './cluster/commands.ts';
export type { ClusterState } from './cluster/state.ts';
export { type ControlPlane, type Mode, type StartOptions, start } from './controlplane.ts';
export {
  findInstallation,
  type Installation,
  InstallError,
  type InstallOptions,
  install,
} from './install/install.ts';
export { binDir, cacheRoot } from './install/paths.ts';
export type { Kubeconfig } from './kubeconfig.ts';
export { freePort } from './ports.ts';
export { DEFAULT_STORAGE_CLASS, PROVISIONER_NAME } from './storage/provisioner.ts';
