import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { KubeClient } from '../kube-client.ts';
import { ManagedProcess } from '../process.ts';

export const KWOK_NODE_ANNOTATION = 'kwok.x-k8s.io/node';

export interface KwokConfig {
  binary: string;
  dir: string;
  kubeconfig: string;
  stages: string;
  podCidr: string;
}

/**
 * A stage kwok's defaults lack: a Running pod whose Ready condition is not True becomes Ready again. The
 * controller-manager marks every pod of a node NotReady when the node's Lease stops being renewed (an API
 * server outage does that to every kwok node at once); kwok's own pod-ready stage only moves Pending pods,
 * so without this the pods would stay NotReady after the nodes are Ready again, where a real kubelet
 * reports them Ready at its next status update.
 */
export const POD_READY_AGAIN_STAGE = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready-again
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Running'
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values:
      - 'True'
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: PodScheduled
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Ready
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: ContainersReady
      {{ range .spec.readinessGates }}
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: {{ .conditionType | Quote }}
      {{ end }}
`;

/** kwok drives fake nodes (heartbeats through Leases) and makes their Pods Running and Ready. */
export function startKwok(c: KwokConfig): ManagedProcess {
  const extra = join(c.dir, 'kwok-stages-recovery.yaml');
  writeFileSync(extra, POD_READY_AGAIN_STAGE);
  const args = [
    `--kubeconfig=${c.kubeconfig}`,
    `--config=${c.stages}`,
    `--config=${extra}`,
    `--manage-nodes-with-annotation-selector=${KWOK_NODE_ANNOTATION}=fake`,
    `--cidr=${c.podCidr}`,
    '--node-ip=127.0.0.1',
    '--node-lease-duration-seconds=40',
  ];
  return new ManagedProcess('kwok', c.binary, args, join(c.dir, 'kwok.log'));
}

/** A kwok node; `taints` keep workloads off it (mixed clusters taint the simulated nodes). */
export function fakeNode(name: string, taints: Array<{ key: string; value: string; effect: string }> = []) {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      annotations: { [KWOK_NODE_ANNOTATION]: 'fake', 'node.alpha.kubernetes.io/ttl': '0' },
      labels: {
        'kubernetes.io/hostname': name,
        'kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
        'node-role.kubernetes.io/agent': '',
        type: 'kwok',
      },
    },
    spec: taints.length ? { taints } : {},
    status: {
      allocatable: { cpu: '32', memory: '256Gi', pods: '250', 'ephemeral-storage': '1Ti' },
      capacity: { cpu: '32', memory: '256Gi', pods: '250', 'ephemeral-storage': '1Ti' },
      nodeInfo: {
        kubeletVersion: 'fake',
        kubeProxyVersion: 'fake',
        operatingSystem: 'linux',
        architecture: 'amd64',
      },
    },
  };
}

interface NodeList {
  items: Array<{
    metadata: { name: string };
    status?: { conditions?: Array<{ type: string; status: string }> };
  }>;
}

export async function readyNodeNames(client: KubeClient): Promise<string[]> {
  const list = await client.json<NodeList>('GET', '/api/v1/nodes');
  return list.items
    .filter((n) => n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'))
    .map((n) => n.metadata.name);
}
