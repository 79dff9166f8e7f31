// A tenant as a real RBAC user: a client certificate of the cluster's CA for `user`, and a Role in
// its namespace with what `edit` grants on the given resources (no controller manager runs in the
// test control plane to aggregate the `edit` ClusterRole's rules). Anything else is forbidden.
import { CoreV1Api, KubeConfig, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import type { ControlPlane } from '../harness/control-plane.ts';
import { until } from '../harness/until.ts';

const EDIT_VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

export async function tenantClient(
  cp: ControlPlane,
  user: string,
  namespace: string,
  resources: string[],
): Promise<CoreV1Api> {
  const rbac = cp.kubeConfig().makeApiClient(RbacAuthorizationV1Api);
  await rbac.createNamespacedRole({
    namespace,
    body: { metadata: { name: `${user}-edit` }, rules: [{ apiGroups: [''], resources, verbs: EDIT_VERBS }] },
  });
  await rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name: `${user}-edit` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: `${user}-edit` },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
    },
  });
  const { cert, key } = await cp.issueClientCert(user);
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: cp.server, caData: Buffer.from(cp.caPem).toString('base64') }],
    users: [
      { name: user, certData: Buffer.from(cert).toString('base64'), keyData: Buffer.from(key).toString('base64') },
    ],
    contexts: [{ name: 'c', cluster: 'c', user }],
    currentContext: 'c',
  });
  const client = kc.makeApiClient(CoreV1Api);
  // RBAC reaches the authorizer's cache asynchronously: wait until the Role lets it list.
  const probe = resources.includes('secrets')
    ? () => client.listNamespacedSecret({ namespace, limit: 1 })
    : () => client.listNamespacedServiceAccount({ namespace, limit: 1 });
  await until(`${user}'s Role to take effect`, async () => {
    await probe();
    return true;
  });
  return client;
}
