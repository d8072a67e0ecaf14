/**
 * The demo: brings up a local cluster (unless one is configured and reachable) and shows its nodes.
 * The Database operator extends this: see operators/database/src/demo.
 */
import { execFileSync } from 'node:child_process';
import { clusterUp } from '@opkit/controlplane';

const state = await clusterUp({ log: (l) => console.log(l) });
console.log(`\nkubectl --kubeconfig ${state.kubeconfigPath} get nodes`);
console.log(
  execFileSync('kubectl', ['--kubeconfig', state.kubeconfigPath, 'get', 'nodes', '-o', 'wide'], {
    encoding: 'utf8',
  }),
);
console.log('The cluster keeps running. Stop it with: npx opkit-controlplane down');
