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
export { ensureImage, ImageBuildError, nodePackageBinary } from './images/build.ts';
export { mergeImageConfig, writeDerivedImage } from './images/derive.ts';
export type { ImageConfig } from './images/oci.ts';
export { MARIADB_IMAGE, NODE_IMAGE, PAUSE_IMAGE, POSTGRES_IMAGE, SHELL_IMAGE } from './images/recipes.ts';
export {
  findInstallation,
  findNodeInstallation,
  type Installation,
  InstallError,
  type InstallOptions,
  install,
  installNode,
  type NodeInstallation,
} from './install/install.ts';
export { binDir, cacheRoot } from './install/paths.ts';
export { findHelm, installHelm } from './install/tools.ts';
export type { Kubeconfig } from './kubeconfig.ts';
export { REAL_NODE_LABEL, SIMULATED_TAINT } from './node/configs.ts';
export { LoadImageError } from './node/load-image.ts';
export { NodePrerequisiteError } from './node/prereqs.ts';
export { freePort } from './ports.ts';
export { DEFAULT_STORAGE_CLASS, PROVISIONER_NAME, XFS_STORAGE_CLASS } from './storage/provisioner.ts';
