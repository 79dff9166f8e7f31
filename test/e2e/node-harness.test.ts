// The node harness itself: a Pod really runs on it, and stopping it leaves nothing behind on
// the host (containers, processes, cgroups, bridge, NAT chain, mounts, folder).
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import { startNode, type NodeCluster } from '../harness/node.ts';
import { mountsUnder, sh } from '../harness/node-host.ts';
import { until } from '../harness/until.ts';

describe('node harness', () => {
  let node: NodeCluster;
  let stopped = false;
  const netns = (): string[] => (existsSync('/var/run/netns') ? readdirSync('/var/run/netns') : []);
  before(async () => {
    node = await startNode({ name: 'node-harness' });
  });
  after(async () => {
    if (!stopped) await node?.stop();
  });

  test('a Pod of the locally built base image runs on the node and reaches the API server by its ClusterIP', async () => {
    const core = node.cp.kubeConfig().makeApiClient(CoreV1Api);
    await core.createNamespacedPod({
      namespace: 'default',
      body: {
        metadata: { name: 'hello' },
        spec: {
          restartPolicy: 'Never',
          containers: [
            {
              name: 'hello',
              image: node.images.base,
              imagePullPolicy: 'Never',
              // The in-cluster address every client uses; the API server answers 401/403 without credentials.
              command: [
                'node',
                '-e',
                `fetch('https://' + process.env.KUBERNETES_SERVICE_HOST + '/version', { signal: AbortSignal.timeout(10000) }).then((r) => console.log('status', r.status), (e) => { console.log('error', e.cause?.code ?? e.message); process.exit(3); })`,
              ],
              env: [{ name: 'NODE_TLS_REJECT_UNAUTHORIZED', value: '0' }],
              terminationMessagePolicy: 'FallbackToLogsOnError',
            },
          ],
        },
      },
    });
    const pod = await until(
      'Pod hello to finish',
      async () => {
        const p = await core.readNamespacedPod({ namespace: 'default', name: 'hello' });
        return p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed' ? p : undefined;
      },
      90_000,
    );
    const terminated = pod.status!.containerStatuses![0].state!.terminated!;
    assert.equal(pod.status!.phase, 'Succeeded', `exit ${terminated.exitCode}: ${terminated.message}`);
    assert.equal(pod.spec!.nodeName, node.nodeName);
    assert.match(pod.status!.podIP!, /^10\.\d+\.\d+\.\d+$/);
  });

  test('stopping the node leaves no container, process, cgroup, bridge, NAT rule, network namespace, mount or folder', async () => {
    const { dir } = node;
    const bridge = `wiw${dir.split('/').pop()}`;
    assert.ok(existsSync(`/sys/class/net/${bridge}`), 'the bridge exists while the node runs');
    // A Pod still running at stop: its network namespace (the peer of its veth on the bridge).
    const core = node.cp.kubeConfig().makeApiClient(CoreV1Api);
    await core.createNamespacedPod({
      namespace: 'default',
      body: {
        metadata: { name: 'running' },
        spec: {
          containers: [
            { name: 'sleep', image: node.images.base, imagePullPolicy: 'Never', command: ['sleep', '3600'] },
          ],
        },
      },
    });
    await until(
      'Pod running to run',
      async () =>
        (await core.readNamespacedPod({ namespace: 'default', name: 'running' })).status?.phase === 'Running' ||
        undefined,
      90_000,
    );
    const ours = [...(await sh('ip', ['-o', 'link', 'show', 'master', bridge])).matchAll(/link-netns (\S+)/g)].map(
      (m) => m[1],
    );
    assert.ok(ours.length > 0 && ours.every((n) => netns().includes(n)), `the Pod's network namespace: ${ours}`);
    const pids = Object.values(node.daemons).map((d) => d.pid);
    stopped = true;
    await node.stop();
    for (const pid of pids) assert.throws(() => process.kill(pid, 0), `process ${pid} is gone`);
    assert.equal(existsSync(dir), false, 'node folder removed');
    assert.deepEqual(mountsUnder(dir), []);
    assert.equal(existsSync(`/sys/class/net/${bridge}`), false, 'bridge removed');
    const nat = await sh('iptables', ['-w', '-t', 'nat', '-S']);
    assert.doesNotMatch(nat, new RegExp(bridge, 'i'));
    const cgroups = readdirSync('/sys/fs/cgroup').flatMap((h) => {
      try {
        return readdirSync(`/sys/fs/cgroup/${h}`).filter((n) => n === `wiw-${dir.split('/').pop()}`);
      } catch {
        return [];
      }
    });
    assert.deepEqual(cgroups, []);
    const leftover = readdirSync('/proc')
      .filter((p) => /^\d+$/.test(p))
      .filter((p) => {
        try {
          return readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(dir);
        } catch {
          return false;
        }
      });
    assert.deepEqual(leftover, [], 'no process names the node folder');
    assert.deepEqual(
      ours.filter((n) => netns().includes(n)),
      [],
      'no network namespace left',
    );
  });
});
