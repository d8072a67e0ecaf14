import { stringify } from 'yaml';
import type { KeyPairPem } from './pki.ts';

/** The kubeconfig as an object, in the shape kubectl and @kubernetes/client-node read. */
export interface Kubeconfig {
  apiVersion: 'v1';
  kind: 'Config';
  'current-context': string;
  clusters: Array<{ name: string; cluster: { server: string; 'certificate-authority-data': string } }>;
  users: Array<{ name: string; user: { 'client-certificate-data': string; 'client-key-data': string } }>;
  contexts: Array<{ name: string; context: { cluster: string; user: string; namespace?: string } }>;
}

const b64 = (s: string) => Buffer.from(s).toString('base64');

export function buildKubeconfig(name: string, server: string, caPem: string, client: KeyPairPem): Kubeconfig {
  return {
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': name,
    clusters: [{ name, cluster: { server, 'certificate-authority-data': b64(caPem) } }],
    users: [
      {
        name: `${name}-admin`,
        user: { 'client-certificate-data': b64(client.certPem), 'client-key-data': b64(client.keyPem) },
      },
    ],
    contexts: [{ name, context: { cluster: name, user: `${name}-admin` } }],
  };
}

export function kubeconfigYaml(config: Kubeconfig): string {
  return stringify(config);
}
