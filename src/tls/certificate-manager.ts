import { X509Certificate, createHash, createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import {
  AdmissionregistrationV1Api,
  CoreV1Api,
  PatchStrategy,
  Watch,
  setHeaderOptions,
  type KubeConfig,
  type V1Secret,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { ConfigError, WebhookError } from '../errors.ts';
import type { KeyPair } from './reloader.ts';
import { generateCertificatesValidFor } from './self-signed.ts';

/**
 * Self-managed certificates: the webhook keeps its own CA and serving certificate in a Secret
 * that every replica shares, and keeps the caBundle of its MutatingWebhookConfiguration current.
 *
 * Secret layout (type Opaque, created empty by the chart so the webhook never needs `create`):
 *   ca.crt            CAs the API server must trust (the caBundle), PEM, newest last
 *   tls.crt, tls.key  the serving pair every replica serves
 *   next.crt, next.key  during a rotation: the pair to serve next, signed by a CA already in ca.crt
 *   annotation NEXT_SINCE: when the next CA was published to the caBundle
 *
 * A rotation never drops a request: the new CA joins the caBundle first; only after
 * --cert-propagation-seconds does any replica serve the new certificate; the old CA stays in
 * the bundle until it expires, by which time every replica serves the new one. Writers use
 * optimistic concurrency on resourceVersion, so of replicas racing, one wins and the others
 * adopt its certificates. No CA key is stored: each rotation makes a fresh CA.
 */

export const NEXT_SINCE_ANNOTATION = 'workload-identity-webhook.io/next-certificate-since';
const IN_CLUSTER_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

export interface CertificateManagerOptions {
  kubeConfig: KubeConfig;
  log: Logger;
  namespace: string;
  secretName: string;
  /** MutatingWebhookConfiguration whose caBundle is kept current; none: only the Secret is managed. */
  webhookConfiguration?: string;
  /** DNS names and IP addresses the serving certificate covers. */
  hosts: readonly string[];
  validitySeconds: number;
  renewBeforeSeconds: number;
  propagationSeconds: number;
  resyncSeconds: number;
}

interface Pair extends KeyPair {
  x509: X509Certificate;
  notAfter: number;
}

interface State {
  secret: V1Secret;
  /** Still-valid CAs of ca.crt, in order. */
  bundle: X509Certificate[];
  current?: Pair;
  next?: Pair;
  nextSince?: number;
}

type Plan =
  | { action: 'none' }
  | { action: 'replace'; why: string }
  | { action: 'start-rotation' }
  | { action: 'promote' }
  | { action: 'drop-next'; why: string };

const CONFLICT_RETRIES = 5;

/** Short SHA-256 fingerprint: enough to tell certificates apart in logs. */
export function fingerprint(cert: X509Certificate): string {
  return createHash('sha256').update(cert.raw).digest('hex').slice(0, 16);
}

function splitPem(text: string): string[] {
  return text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
}

function decode(data: Record<string, string> | undefined, key: string): string | undefined {
  const b64 = data?.[key];
  return b64 ? Buffer.from(b64, 'base64').toString('utf8') : undefined;
}

function parsePair(cert: string | undefined, key: string | undefined): Pair | undefined {
  if (!cert || !key) return undefined;
  try {
    const x509 = new X509Certificate(cert);
    if (!x509.checkPrivateKey(createPrivateKey(key))) return undefined;
    return { cert, key, x509, notAfter: new Date(x509.validTo).getTime() };
  } catch {
    return undefined;
  }
}

/** Reads the Secret's data; anything unparsable counts as absent. */
export function parseState(secret: V1Secret, now = Date.now()): State {
  const data = secret.data ?? undefined;
  const bundle: X509Certificate[] = [];
  for (const pem of splitPem(decode(data, 'ca.crt') ?? '')) {
    try {
      const ca = new X509Certificate(pem);
      if (new Date(ca.validTo).getTime() > now) bundle.push(ca);
    } catch {
      // an unreadable entry is dropped on the next write
    }
  }
  const since = Date.parse(secret.metadata?.annotations?.[NEXT_SINCE_ANNOTATION] ?? '');
  return {
    secret,
    bundle,
    current: parsePair(decode(data, 'tls.crt'), decode(data, 'tls.key')),
    next: parsePair(decode(data, 'next.crt'), decode(data, 'next.key')),
    nextSince: Number.isNaN(since) ? undefined : since,
  };
}

function signedByBundle(pair: Pair, bundle: readonly X509Certificate[]): boolean {
  return bundle.some((ca) => pair.x509.checkIssued(ca) && pair.x509.verify(ca.publicKey));
}

function coversHosts(pair: Pair, hosts: readonly string[]): boolean {
  return hosts.every((h) =>
    isIP(h) ? pair.x509.checkIP(h) !== undefined : pair.x509.checkHost(h, { wildcards: false }) !== undefined,
  );
}

export interface Timing {
  renewBeforeMs: number;
  propagationMs: number;
}

/**
 * What the Secret needs now. Pure: the same state and clock give the same plan, so replicas
 * that read the same Secret agree, and the loser of a write race simply re-plans.
 */
export function planFor(state: State, hosts: readonly string[], timing: Timing, now = Date.now()): Plan {
  const { current, next } = state;
  if (!current) return { action: 'replace', why: 'no serving certificate yet' };
  if (current.notAfter <= now) return { action: 'replace', why: 'the serving certificate has expired' };
  if (!signedByBundle(current, state.bundle))
    return { action: 'replace', why: 'the serving certificate is not signed by a CA in ca.crt' };
  if (!coversHosts(current, hosts))
    return { action: 'replace', why: 'the serving certificate does not cover the configured hosts' };
  if (next) {
    if (!signedByBundle(next, state.bundle) || !coversHosts(next, hosts) || next.notAfter <= now) {
      return { action: 'drop-next', why: 'the pending certificate is unusable' };
    }
    if (state.nextSince !== undefined && now >= state.nextSince + timing.propagationMs) return { action: 'promote' };
    return { action: 'none' };
  }
  if (now >= current.notAfter - timing.renewBeforeMs) return { action: 'start-rotation' };
  return { action: 'none' };
}

/** Whether a base64 caBundle holds `ca`. */
function trusts(caBundle: string | undefined, ca: X509Certificate): boolean {
  const pems = splitPem(Buffer.from(caBundle ?? '', 'base64').toString('utf8'));
  return pems.some((pem) => pem.replace(/\s/g, '') === ca.toString().replace(/\s/g, ''));
}

function b64(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64');
}

function bundlePem(bundle: readonly X509Certificate[]): string {
  return bundle.map((ca) => ca.toString().trim() + '\n').join('');
}

export class CertificateManager {
  readonly #o: CertificateManagerOptions;
  readonly #core: CoreV1Api;
  readonly #admission: AdmissionregistrationV1Api;
  readonly #watch: Watch;
  #serving: KeyPair | undefined;
  #listeners: ((pair: KeyPair) => void)[] = [];
  #timer: NodeJS.Timeout | undefined;
  #watchAbort: AbortController | undefined;
  #watchRetry: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = false;

  constructor(options: CertificateManagerOptions) {
    this.#o = options;
    this.#core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.#admission = options.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
    this.#watch = new Watch(options.kubeConfig);
  }

  /** Fills the Secret if needed and returns the pair to serve; then keeps it current. */
  async start(): Promise<KeyPair> {
    await this.#reconcile(true);
    void this.#startWatch();
    return this.#serving!;
  }

  /** Called with each new serving pair (a rotation was promoted, or another replica replaced it). */
  onChange(listener: (pair: KeyPair) => void): void {
    this.#listeners.push(listener);
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    clearTimeout(this.#watchRetry);
    this.#watchAbort?.abort();
  }

  /** Runs reconciles one at a time; a trigger during a run causes exactly one more run. */
  #trigger(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = this.#reconcile(false)
      .catch((err: Error) => {
        this.#o.log.warn({ err, secret: this.#o.secretName }, 'certificate reconcile failed; retrying');
        this.#schedule(Math.min(5_000, this.#o.resyncSeconds * 1000));
      })
      .finally(() => {
        this.#running = undefined;
        if (this.#again) {
          this.#again = false;
          this.#trigger();
        }
      });
  }

  #schedule(delayMs: number): void {
    if (this.#stopped) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#trigger(), Math.max(100, delayMs));
    this.#timer.unref();
  }

  async #reconcile(first: boolean): Promise<void> {
    const o = this.#o;
    const timing = { renewBeforeMs: o.renewBeforeSeconds * 1000, propagationMs: o.propagationSeconds * 1000 };
    let state: State | undefined;
    for (let attempt = 0; ; attempt++) {
      const secret = await this.#readSecret(first);
      state = parseState(secret);
      const plan = planFor(state, o.hosts, timing);
      if (plan.action === 'none') break;
      const written = await this.#write(state, plan);
      if (written) {
        state = written;
        break;
      }
      // 409: another replica wrote first; its result is re-read and re-planned.
      if (attempt >= CONFLICT_RETRIES)
        throw new WebhookError('WIW_CERT_CONFLICT', `Secret ${o.namespace}/${o.secretName} kept changing under us`);
      o.log.info({ secret: o.secretName }, 'certificate Secret changed by another replica; adopting its contents');
    }

    if (o.webhookConfiguration) {
      const added = await this.#syncCaBundle(state);
      if (added && state.next) {
        // The pending CA reached the API server only now (its writer may have died before
        // patching): count the propagation time from here.
        state = (await this.#write(state, { action: 'none' }, Date.now())) ?? state;
      }
    }

    const current = state.current!;
    if (this.#serving?.cert !== current.cert) {
      const previous = this.#serving;
      this.#serving = { cert: current.cert, key: current.key };
      if (previous) {
        o.log.info(
          { fingerprint: fingerprint(current.x509), notAfter: current.x509.validTo },
          'serving the new certificate',
        );
        for (const listener of this.#listeners) listener(this.#serving);
      }
    }

    this.#schedule(this.#nextWakeMs(state, timing));
  }

  #nextWakeMs(state: State, timing: Timing): number {
    const now = Date.now();
    const resync = this.#o.resyncSeconds * 1000;
    const deadlines = [now + resync];
    if (state.next && state.nextSince !== undefined) deadlines.push(state.nextSince + timing.propagationMs);
    else if (state.current) deadlines.push(state.current.notAfter - timing.renewBeforeMs);
    return Math.min(...deadlines) - now;
  }

  async #readSecret(first: boolean): Promise<V1Secret> {
    const { namespace, secretName } = this.#o;
    try {
      return await this.#core.readNamespacedSecret({ name: secretName, namespace });
    } catch (err) {
      const code = (err as { code?: number }).code;
      if (first && code === 404) {
        throw new ConfigError(
          `--cert-secret: Secret ${namespace}/${secretName} does not exist; create it empty (the chart does) and start again`,
        );
      }
      if (first && code === 403) {
        throw new ConfigError(
          `--cert-secret: no permission to read Secret ${namespace}/${secretName}; grant get, update and watch on it`,
        );
      }
      throw err;
    }
  }

  /** Writes the planned change with the read resourceVersion; undefined on a conflict. */
  async #write(state: State, plan: Plan, touchNextSince?: number): Promise<State | undefined> {
    const o = this.#o;
    const now = Date.now();
    let bundle = [...state.bundle];
    let current = state.current;
    let next = state.next;
    let nextSince = touchNextSince ?? state.nextSince;
    const generate = async (): Promise<Pair> => {
      const set = await generateCertificatesValidFor(o.hosts, o.validitySeconds);
      const ca = new X509Certificate(set.caPem);
      bundle.push(ca);
      return parsePair(set.certPem, set.keyPem)!;
    };
    switch (plan.action) {
      case 'replace':
        // Unexpired CAs stay: a replica still serving the old pair keeps working meanwhile.
        current = await generate();
        next = undefined;
        nextSince = undefined;
        break;
      case 'start-rotation':
        next = await generate();
        nextSince = now;
        break;
      case 'promote':
        current = next;
        next = undefined;
        nextSince = undefined;
        break;
      case 'drop-next':
        next = undefined;
        nextSince = undefined;
        break;
      case 'none':
        break;
    }
    bundle = bundle.filter((ca) => new Date(ca.validTo).getTime() > now);
    const data: Record<string, string> = {
      'ca.crt': b64(bundlePem(bundle)),
      'tls.crt': b64(current!.cert),
      'tls.key': b64(current!.key),
    };
    if (next) {
      data['next.crt'] = b64(next.cert);
      data['next.key'] = b64(next.key);
    }
    const existing = state.secret;
    const annotations = { ...existing.metadata?.annotations };
    if (nextSince === undefined) delete annotations[NEXT_SINCE_ANNOTATION];
    else annotations[NEXT_SINCE_ANNOTATION] = new Date(nextSince).toISOString();
    const body: V1Secret = {
      ...existing,
      metadata: { ...existing.metadata, annotations },
      type: existing.type ?? 'Opaque',
      data,
    };
    let saved: V1Secret;
    try {
      saved = await this.#core.replaceNamespacedSecret({ name: o.secretName, namespace: o.namespace, body });
    } catch (err) {
      if ((err as { code?: number }).code === 409) return undefined;
      throw err;
    }
    const fields = {
      secret: `${o.namespace}/${o.secretName}`,
      serving: fingerprint(current!.x509),
      next: next && fingerprint(next.x509),
      caBundle: bundle.map(fingerprint),
    };
    if (plan.action === 'replace') o.log.info({ ...fields, why: plan.why }, 'created a CA and serving certificate');
    else if (plan.action === 'start-rotation')
      o.log.info(fields, 'certificate rotation started: new CA published, not served yet');
    else if (plan.action === 'promote') o.log.info(fields, 'certificate rotation: new certificate promoted');
    else if (plan.action === 'drop-next') o.log.warn({ ...fields, why: plan.why }, 'dropped the pending certificate');
    else if (touchNextSince !== undefined)
      o.log.info(fields, 'pending CA published to the caBundle just now; propagation counted from now');
    return parseState(saved);
  }

  /** Makes every webhook's caBundle equal ca.crt; true when it added the pending CA just now. */
  async #syncCaBundle(state: State): Promise<boolean> {
    // Another replica may patch the same configuration at the same moment: its change fails our
    // test on resourceVersion (422, or 409), and we read again and redo ours.
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.#patchCaBundle(state);
      } catch (err) {
        const code = (err as { code?: number }).code;
        if ((code !== 422 && code !== 409) || attempt >= CONFLICT_RETRIES) throw err;
        this.#o.log.info(
          { webhookConfiguration: this.#o.webhookConfiguration },
          'caBundle changed concurrently; reading it again',
        );
      }
    }
  }

  async #patchCaBundle(state: State): Promise<boolean> {
    const name = this.#o.webhookConfiguration!;
    let config;
    try {
      config = await this.#admission.readMutatingWebhookConfiguration({ name });
    } catch (err) {
      if ((err as { code?: number }).code === 404) {
        this.#o.log.warn(
          { webhookConfiguration: name },
          'MutatingWebhookConfiguration not found; caBundle not set yet',
        );
        return false;
      }
      throw err;
    }
    const wanted = b64(bundlePem(state.bundle));
    const webhooks = config.webhooks ?? [];
    const stale = webhooks.map((w, i) => ({ w, i })).filter(({ w }) => w.clientConfig.caBundle !== wanted);
    if (stale.length === 0) return false;
    const nextCa =
      state.next &&
      state.bundle.find((ca) => state.next!.x509.checkIssued(ca) && state.next!.x509.verify(ca.publicKey));
    const addsNext = nextCa !== undefined && stale.some(({ w }) => !trusts(w.clientConfig.caBundle, nextCa));
    // A test on resourceVersion: a concurrent change fails this patch, and the next run redoes it.
    const ops = [
      { op: 'test', path: '/metadata/resourceVersion', value: config.metadata?.resourceVersion },
      ...stale.flatMap(({ w, i }) => [
        { op: 'test', path: `/webhooks/${i}/name`, value: w.name },
        { op: 'add', path: `/webhooks/${i}/clientConfig/caBundle`, value: wanted },
      ]),
    ];
    await this.#admission.patchMutatingWebhookConfiguration(
      { name, body: ops },
      setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
    );
    this.#o.log.info(
      { webhookConfiguration: name, webhooks: stale.length, caBundle: state.bundle.map(fingerprint) },
      'caBundle updated',
    );
    return addsNext;
  }

  async #startWatch(): Promise<void> {
    if (this.#stopped) return;
    const { namespace, secretName } = this.#o;
    let ended = false;
    const restart = (err?: unknown) => {
      if (ended) return;
      ended = true;
      if (this.#stopped) return;
      if (err && (err as Error).name !== 'AbortError') {
        this.#o.log.warn({ err, secret: secretName }, 'certificate Secret watch failed; resync continues');
      }
      clearTimeout(this.#watchRetry);
      // The resync timer covers the gap; a short pause keeps a failing watch from spinning.
      this.#watchRetry = setTimeout(() => void this.#startWatch(), 1000);
      this.#watchRetry.unref();
    };
    try {
      this.#watchAbort = await this.#watch.watch(
        `/api/v1/namespaces/${namespace}/secrets`,
        { fieldSelector: `metadata.name=${secretName}` },
        (phase) => {
          if (phase === 'ADDED' || phase === 'MODIFIED') this.#trigger();
        },
        restart,
      );
    } catch (err) {
      restart(err);
    }
  }
}

/** The in-cluster namespace, for --cert-secret-namespace left empty. */
function ownNamespace(): string {
  try {
    return readFileSync(IN_CLUSTER_NAMESPACE_FILE, 'utf8').trim();
  } catch {
    throw new ConfigError(
      '--cert-secret-namespace is needed outside a cluster (no service account namespace file to default to)',
    );
  }
}

export interface SelfManagedSettings {
  certSecret?: string;
  certSecretNamespace?: string;
  certWebhookConfiguration?: string;
  selfSignedHosts: string[];
  certValiditySeconds: number;
  certRenewBeforeSeconds: number;
  certPropagationSeconds: number;
  certResyncSeconds: number;
}

/** The server's TLS source in self-managed mode: the first pair, then each rotation. */
export async function selfManagedTls(
  config: SelfManagedSettings,
  kubeConfig: KubeConfig,
  log: Logger,
): Promise<{ pair: KeyPair; watch: (apply: (pair: KeyPair) => void) => () => void }> {
  const manager = new CertificateManager({
    kubeConfig,
    log,
    namespace: config.certSecretNamespace ?? ownNamespace(),
    secretName: config.certSecret!,
    webhookConfiguration: config.certWebhookConfiguration,
    hosts: config.selfSignedHosts,
    validitySeconds: config.certValiditySeconds,
    renewBeforeSeconds: config.certRenewBeforeSeconds,
    propagationSeconds: config.certPropagationSeconds,
    resyncSeconds: config.certResyncSeconds,
  });
  const pair = await manager.start();
  return {
    pair,
    watch: (apply) => {
      manager.onChange(apply);
      return () => manager.stop();
    },
  };
}
