// Keeps the caBundle of every webhook of a MutatingWebhookConfiguration equal to the Secret's
// ca.crt. Several replicas may patch at the same moment: each patch tests resourceVersion, and
// the loser reads again and redoes its change.

import type { X509Certificate } from 'node:crypto';
import type { V1MutatingWebhookConfiguration } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { apiPath, type KubeApi } from '../kube/api.ts';
import { statusOf } from '../kube/list-watch.ts';
import { b64, bundlePem, fingerprint, issuerIn, splitPem, type State } from './certificate-state.ts';

/** Writes that lose a race with another replica (409, or 422 on the resourceVersion test) are redone this often. */
export const CONFLICT_RETRIES = 5;

/** Whether a base64 caBundle holds `ca`. */
function trusts(caBundle: string | undefined, ca: X509Certificate): boolean {
  const pems = splitPem(Buffer.from(caBundle ?? '', 'base64').toString('utf8'));
  return pems.some((pem) => pem.replace(/\s/g, '') === ca.toString().replace(/\s/g, ''));
}

/** Makes every webhook's caBundle equal ca.crt; true when it added the pending CA just now. */
export async function syncCaBundle(api: KubeApi, name: string, state: State, log: Logger): Promise<boolean> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await patchCaBundle(api, name, state, log);
    } catch (err) {
      const code = statusOf(err);
      if ((code !== 422 && code !== 409) || attempt >= CONFLICT_RETRIES) throw err;
      log.info({ webhookConfiguration: name }, 'caBundle changed concurrently; reading it again');
    }
  }
}

const webhookConfigurationPath = (name: string) =>
  apiPath('apis', 'admissionregistration.k8s.io', 'v1', 'mutatingwebhookconfigurations', name);

async function patchCaBundle(api: KubeApi, name: string, state: State, log: Logger): Promise<boolean> {
  let config: V1MutatingWebhookConfiguration;
  try {
    config = await api.request('GET', webhookConfigurationPath(name));
  } catch (err) {
    if (statusOf(err) === 404) {
      log.warn({ webhookConfiguration: name }, 'MutatingWebhookConfiguration not found; caBundle not set yet');
      return false;
    }
    throw err;
  }
  const wanted = b64(bundlePem(state.bundle));
  const webhooks = config.webhooks ?? [];
  const stale = webhooks.map((w, i) => ({ w, i })).filter(({ w }) => w.clientConfig.caBundle !== wanted);
  if (stale.length === 0) return false;
  const nextCa = state.next && issuerIn(state.next, state.bundle);
  const addsNext = nextCa !== undefined && stale.some(({ w }) => !trusts(w.clientConfig.caBundle, nextCa));
  // A test on resourceVersion: a concurrent change fails this patch (422), and it is redone.
  const ops = [
    { op: 'test', path: '/metadata/resourceVersion', value: config.metadata?.resourceVersion },
    ...stale.flatMap(({ w, i }) => [
      { op: 'test', path: `/webhooks/${i}/name`, value: w.name },
      { op: 'add', path: `/webhooks/${i}/clientConfig/caBundle`, value: wanted },
    ]),
  ];
  await api.request('PATCH', webhookConfigurationPath(name), {
    body: ops,
    contentType: 'application/json-patch+json',
  });
  log.info(
    { webhookConfiguration: name, webhooks: stale.length, caBundle: state.bundle.map(fingerprint) },
    'caBundle updated',
  );
  return addsNext;
}
