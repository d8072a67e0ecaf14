/** Helpers of the real-node tests: kubectl against a control plane, and what a run may leave behind. */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import type { ControlPlane } from '../../src/index.ts';
import { loopDevicesUnder } from '../../src/storage/loop-volume.ts';

export function kubectl(
  cp: ControlPlane,
  args: string[],
  timeoutMs = 60_000,
): { code: number; out: string; stdout: string } {
  const r = spawnSync('kubectl', ['--kubeconfig', cp.kubeconfigPath, ...args], {
    encoding: 'utf8',
    timeout: timeoutMs,
  });
  return { code: r.status ?? -1, out: `${r.stdout ?? ''}${r.stderr ?? ''}`, stdout: r.stdout ?? '' };
}

/**
 * Runs a command in a pod's container and returns its stdout; throws with all output when it fails. Stdout
 * alone: kubectl may warn on stderr after a successful exec ('websocket.go: Unknown stream id 1').
 */
export function exec(cp: ControlPlane, ns: string, pod: string, cmd: string[]): string {
  const r = kubectl(cp, ['exec', '-n', ns, pod, '--', ...cmd]);
  if (r.code !== 0) throw new Error(`kubectl exec ${pod} -- ${cmd.join(' ')} failed (${r.code}): ${r.out}`);
  return r.stdout;
}

/** Everything of a real-node run still present on the host: processes, mounts, loop devices, netns, links, records. */
export function leftovers(dir: string, networkId: string): string[] {
  const found: string[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
    try {
      const cmd = readFileSync(`/proc/${e}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (cmd.includes(dir) || cmd.includes(`opk-${networkId}`))
        found.push(`process ${e}: ${cmd.slice(0, 120)}`);
    } catch {
      // exited meanwhile
    }
  }
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const mountPoint = line.split(' ')[4] ?? '';
    if (mountPoint.startsWith(dir) || mountPoint.includes(`opk-${networkId}`))
      found.push(`mount ${mountPoint}`);
  }
  for (const ns of existsSync('/run/netns') ? readdirSync('/run/netns') : [])
    if (ns.startsWith(`opk-${networkId}`)) found.push(`netns ${ns}`);
  for (const link of readdirSync('/sys/class/net'))
    if (link.includes(networkId)) found.push(`network device ${link}`);
  for (const c of readdirSync('/sys/fs/cgroup')) {
    if (existsSync(`/sys/fs/cgroup/${c}/opkit`))
      for (const d of readdirSync(`/sys/fs/cgroup/${c}/opkit`))
        if (d.startsWith(`opk-${networkId}`)) found.push(`cgroup ${c}/opkit/${d}`);
  }
  const rules = spawnSync('iptables-save', [], { encoding: 'utf8' }).stdout ?? '';
  if (/KUBE-/.test(rules)) found.push('iptables KUBE chains in the host namespace');
  if (existsSync(`/run/opkit/nodes/${networkId}.json`)) found.push('record file');
  for (const loop of loopDevicesUnder(dir)) found.push(`loop device ${loop.device} of ${loop.backingFile}`);
  if (existsSync(dir) && existsSync(`${dir}/nodes`)) found.push(`directory ${dir}/nodes`);
  return found;
}
