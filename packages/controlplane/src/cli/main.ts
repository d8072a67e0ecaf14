#!/usr/bin/env node
/**
 * opkit-controlplane: build the local control plane and keep a local cluster running.
 * (The `opkit` CLI exposes the same commands as `opkit cluster ...`.)
 */
import { parseArgs } from 'node:util';
import { ClusterCommandError } from '../cluster/commands.ts';
import { ImageBuildError } from '../images/build.ts';
import { InstallError } from '../install/install.ts';
import { LoadImageError } from '../node/load-image.ts';
import { NodePrerequisiteError } from '../node/prereqs.ts';
import { runClusterCommand } from './cluster-command.ts';

const USAGE = `Usage: opkit-controlplane <command> [flags]

Commands:
  install               build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
                        into the cache directory ($OPKIT_CACHE_DIR, default ~/.cache/opkit);
                        with --real-nodes 1 also kubelet, kube-proxy, CoreDNS and the opkit.local images
  up                    start a local cluster in the background and print its kubeconfig path
  down                  stop it and remove its files
  status                show whether it runs, its server and its nodes
  kubeconfig            print the kubeconfig path (--print: its contents)
  load-image <path>     import an OCI archive or layout directory into the real nodes (like kind load)
  helm -- <args>        helm with the cluster's kubeconfig (built on first use from the pinned module:
                        minutes), e.g. helm --name c -- install db ./chart -n db --create-namespace

Flags:
  --name <name>         cluster name (default opkit)
  --mode <mode>         cluster (default: controllers, scheduler, kwok nodes, storage) or apiserver
  --nodes <n>           fake nodes in cluster mode (default 3)
  --real-nodes <n>      real nodes (kubelet, containerd, kube-proxy; root): kwok nodes get tainted
                        opkit.dev/simulated=true:NoSchedule, real ones are labelled opkit.dev/node=real
  --print               with kubeconfig: print the file instead of its path

Examples:
  opkit-controlplane up && kubectl --kubeconfig "$(opkit-controlplane kubeconfig)" get nodes
  opkit-controlplane down`;

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    name: { type: 'string', default: 'opkit' },
    mode: { type: 'string', default: 'cluster' },
    nodes: { type: 'string', default: '3' },
    'real-nodes': { type: 'string', default: '0' },
    print: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});

const command = positionals[0];
if (values.help || !command) {
  console.log(USAGE);
  process.exit(command || values.help ? 0 : 2);
}
try {
  process.exitCode = await runClusterCommand(command, values, {
    program: 'opkit-controlplane',
    args: positionals.slice(1),
  });
} catch (err) {
  if (
    err instanceof InstallError ||
    err instanceof ClusterCommandError ||
    err instanceof NodePrerequisiteError ||
    err instanceof LoadImageError ||
    err instanceof ImageBuildError
  ) {
    console.error(`error: ${err.message}\nnext: ${err.hint}`);
    process.exit(1);
  }
  throw err;
}
