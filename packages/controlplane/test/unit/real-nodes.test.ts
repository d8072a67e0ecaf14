/** The pure parts of real nodes: network plan, OCI layout JSON, node configuration files. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { imageConfigJson, indexJson, MEDIA, manifestJson } from '../../src/images/oci.ts';
import { PAUSE_IMAGE, RECIPES } from '../../src/images/recipes.ts';
import {
  containerdConfig,
  corefile,
  kubeDnsObjects,
  kubeletConfig,
  nodePaths,
} from '../../src/node/configs.ts';
import { CLUSTER_DNS_IP, freeSubnetIndex, planNetwork, SERVICE_ROUTE } from '../../src/node/network.ts';
import { imageBytes, XFS_MIN_BYTES } from '../../src/storage/loop-volume.ts';

test('the network plan: one subnet index per cluster, a pod subnet and an address per node', () => {
  const net = planNetwork('abc123', 7, 2, (i) => `real-node-${i}`);
  assert.equal(net.bridge, 'opk-abc123');
  assert.equal(net.hostIp, '10.250.7.1');
  assert.deepEqual(
    net.nodes.map((n) => [n.name, n.netns, n.ip, n.podSubnet, n.hostVeth]),
    [
      ['real-node-0', 'opk-abc123-0', '10.250.7.10', '10.232.7.0/24', 'opkvabc1230'],
      ['real-node-1', 'opk-abc123-1', '10.250.7.11', '10.233.7.0/24', 'opkvabc1231'],
    ],
  );
  for (const n of net.nodes)
    assert.ok(n.hostVeth.length <= 15, 'Linux interface names have at most 15 bytes');
  assert.throws(() => planNetwork('abc123', 1, 9, String), RangeError);
  assert.equal(freeSubnetIndex(['127.0.0.1', '10.250.1.1', '10.250.2.1', '192.168.1.5']), 3);
  assert.equal(freeSubnetIndex([]), 1);
});

test('the OCI layout: the config lists the layer as its diff id, the index names the image for containerd', () => {
  const layer = { mediaType: MEDIA.layer, digest: `sha256:${'a'.repeat(64)}`, size: 10 };
  const config = JSON.parse(imageConfigJson({ cmd: ['/bin/bash'], user: '999' }, layer.digest, 'amd64'));
  assert.deepEqual(config.rootfs, { type: 'layers', diff_ids: [layer.digest] });
  assert.equal(config.config.User, '999');
  const cfg = { mediaType: MEDIA.config, digest: `sha256:${'b'.repeat(64)}`, size: 5 };
  assert.deepEqual(JSON.parse(manifestJson(cfg, layer)).layers, [layer]);
  const index = JSON.parse(
    indexJson({ mediaType: MEDIA.manifest, digest: cfg.digest, size: 3 }, 'opkit.local/x:2', 'amd64'),
  );
  assert.equal(index.manifests[0].annotations['io.containerd.image.name'], 'opkit.local/x:2');
  assert.equal(index.manifests[0].annotations['org.opencontainers.image.ref.name'], '2');
  assert.deepEqual(index.manifests[0].platform, { architecture: 'amd64', os: 'linux' });
});

test('images are named under opkit.local, postgres laid out like the official image', () => {
  for (const name of Object.keys(RECIPES)) assert.match(name, /^opkit\.local\//);
  const pg = RECIPES['opkit.local/postgres:15']!;
  assert.ok(pg.config.env?.some((e) => e.startsWith('PATH=') && e.endsWith(':/usr/lib/postgresql/15/bin')));
  assert.ok(pg.config.env?.includes('PGDATA=/var/lib/postgresql/data'));
  assert.match(pg.essentialHook ?? '', /postgres:x:999:999:/);
  const maria = RECIPES['opkit.local/mariadb:10.11']!;
  assert.match(maria.essentialHook ?? '', /mysql:x:999:999:/);
  assert.deepEqual(maria.config.volumes, ['/var/lib/mysql']);
});

test('node configuration: the facts this machine kind needs are set', () => {
  const p = nodePaths('/x/nodes/real-node-0');
  const toml = containerdConfig(p);
  assert.match(
    toml,
    /restrict_oom_score_adj = true/,
    'no CAP_SYS_RESOURCE: oom_score_adj may not be lowered',
  );
  assert.match(toml, /SystemdCgroup = false/);
  assert.match(toml, new RegExp(`sandbox_image = "${PAUSE_IMAGE}"`));
  assert.match(toml, /netns_mounts_under_state_dir = true/);
  assert.match(toml, /address = "\/x\/nodes\/real-node-0\/containerd.sock"/);
  const kubelet = kubeletConfig({
    paths: p,
    netns: 'opk-1-0',
    dnsIp: '10.250.1.1',
    caFile: 'ca',
    certFile: 'c',
    keyFile: 'k',
  });
  for (const line of [
    'cgroupDriver: cgroupfs',
    'failCgroupV1: false',
    'failSwapOn: false',
    'cgroupRoot: /opkit/opk-1-0',
  ])
    assert.ok(kubelet.includes(line), line);
  const dns = corefile('10.250.1.1', '/kc', 'opkit', 9153);
  assert.match(dns, /bind 10\.250\.1\.1/);
  assert.doesNotMatch(dns, /forward/, 'the cluster DNS never forwards names upstream');
});

test('kube-dns: a selectorless Service at the .10 of the Service range, UDP and TCP, its slice naming CoreDNS', () => {
  assert.equal(CLUSTER_DNS_IP, `${SERVICE_ROUTE.split('.').slice(0, 3).join('.')}.10`);
  const { service, endpointSlice } = kubeDnsObjects(CLUSTER_DNS_IP, '10.250.3.1');
  assert.equal(service.metadata.namespace, 'kube-system');
  assert.equal(service.spec.clusterIP, '10.96.0.10');
  assert.ok(!('selector' in service.spec), 'selectorless: the EndpointSlice controller must not own it');
  assert.deepEqual(
    service.spec.ports.map((p) => `${p.protocol}/${p.port}->${p.targetPort}`),
    ['UDP/53->53', 'TCP/53->53'],
  );
  assert.equal(endpointSlice.metadata.labels['kubernetes.io/service-name'], 'kube-dns');
  assert.notEqual(
    endpointSlice.metadata.labels['endpointslice.kubernetes.io/managed-by'],
    'endpointslice-controller.k8s.io',
  );
  assert.deepEqual(endpointSlice.endpoints[0]?.addresses, ['10.250.3.1']);
  // The API server's rule for label values (a '/' in one made it answer 422).
  for (const value of [
    ...Object.values(service.metadata.labels),
    ...Object.values(endpointSlice.metadata.labels),
  ])
    assert.match(value, /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/, value);
  // The slice's port names must match the Service's, or kube-proxy programs no rule for that port.
  assert.deepEqual(
    endpointSlice.ports.map((p) => p.name),
    service.spec.ports.map((p) => p.name),
  );
});

test('loop volumes: whole MiB files, never below what mkfs.xfs accepts', () => {
  assert.equal(XFS_MIN_BYTES, 300 * 2 ** 20);
  assert.equal(imageBytes(10 * 2 ** 20), XFS_MIN_BYTES);
  assert.equal(imageBytes(2 ** 30), 2 ** 30);
  assert.equal(imageBytes(2 ** 30 + 1), 2 ** 30 + 2 ** 20);
  assert.equal(imageBytes(1e9), 954 * 2 ** 20);
});
