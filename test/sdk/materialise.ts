// What one container of a stored Pod would see, laid out under a per-test root folder: its env
// vars, its projected ServiceAccount tokens (from TokenRequest, bound to the Pod, with the
// injected audience and expiry, as the kubelet asks for them), its downwardAPI files resolved
// from the stored Pod, and the keys of the Secrets it mounts as the API server stores them.
// Nothing is changed except paths, and only by the root prefix:
//  - env values naming a file inside one of the container's mounts;
//  - `credential_source.file` of an `external_account` JSON file (the GCP credential files);
//  - `web_identity_token_file` of an AWS shared config file (a Secret's credentialsFile, the
//    profiles of a Pod's config file), in every profile.
// That is the whole rewrite; every other byte is as the webhook injected it.
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import type { ControlPlane } from '../harness/control-plane.ts';

export interface ProjectedToken {
  /** Path inside the container. */
  path: string;
  hostPath: string;
  audience: string;
  expirationSeconds: number;
  token: string;
}

export interface MaterialisedContainer {
  root: string;
  /** The container's env, path values prefixed with `root`. */
  env: Record<string, string>;
  /** Env var names whose values were prefixed (for the record: nothing else was touched). */
  rewrittenEnv: string[];
  /** Host path of each file, by its path inside the container. */
  files: Map<string, string>;
  tokens: ProjectedToken[];
  /**
   * Replaces a token file the way the kubelet rotates it (a new TokenRequest, an atomic swap);
   * returns the new token.
   */
  rotateToken(path: string): Promise<string>;
  /** Rewrites the files of mounted Secrets from the stored Secrets, as the kubelet syncs them. */
  syncSecrets(): Promise<void>;
}

export interface MaterialiseOptions {
  /** Request the token for this audience instead of the injected one (the wrong-audience case). */
  tokenAudience?: string;
}

export async function materialiseContainer(
  cp: ControlPlane,
  pod: V1Pod,
  containerName: string,
  root: string,
  options: MaterialiseOptions = {},
): Promise<MaterialisedContainer> {
  const container = pod.spec?.containers.find((c) => c.name === containerName);
  if (!container) throw new Error(`Pod ${pod.metadata?.name} has no container ${containerName}`);
  const mountPaths = (container.volumeMounts ?? []).map((m) => m.mountPath);
  const hostPath = (path: string): string => join(root, path);
  const insideMount = (value: string): boolean => mountPaths.some((m) => value.startsWith(`${m}/`));

  const files = new Map<string, string>();
  const tokens: ProjectedToken[] = [];
  const secretMounts: { mountPath: string; secretName: string }[] = [];
  const core = cp.kubeConfig().makeApiClient(CoreV1Api);
  const syncSecrets = async (): Promise<void> => {
    for (const { mountPath, secretName } of secretMounts) {
      const secret = await core.readNamespacedSecret({ namespace: pod.metadata!.namespace!, name: secretName });
      for (const [key, value] of Object.entries(secret.data ?? {})) {
        const file = `${mountPath}/${key}`;
        await writeAtomically(
          hostPath(file),
          rewriteFile(Buffer.from(value, 'base64').toString('utf8'), insideMount, root),
        );
        files.set(file, hostPath(file));
      }
    }
  };
  for (const mount of container.volumeMounts ?? []) {
    const volume = pod.spec?.volumes?.find((v) => v.name === mount.name);
    if (volume?.secret) {
      if (volume.secret.items) throw new Error(`volume ${mount.name}: secret items are not materialised`);
      secretMounts.push({ mountPath: mount.mountPath, secretName: volume.secret.secretName! });
      continue;
    }
    // A downwardAPI volume (the pfnet dialect's direct mode) is one projected downwardAPI source.
    const sources =
      volume?.projected?.sources ?? (volume?.downwardAPI ? [{ downwardAPI: volume.downwardAPI }] : undefined);
    if (!sources)
      throw new Error(
        `volume ${mount.name} is neither projected, downwardAPI nor a Secret; only those are materialised`,
      );
    for (const source of sources) {
      if (source.serviceAccountToken) {
        const { audience, expirationSeconds, path } = source.serviceAccountToken;
        const requested = options.tokenAudience ?? audience!;
        const token = await requestPodToken(cp, pod, requested, expirationSeconds ?? 3600);
        const file = `${mount.mountPath}/${path}`;
        await writeAtomically(hostPath(file), token);
        files.set(file, hostPath(file));
        tokens.push({
          path: file,
          hostPath: hostPath(file),
          audience: requested,
          expirationSeconds: expirationSeconds ?? 3600,
          token,
        });
      } else if (source.downwardAPI) {
        for (const item of source.downwardAPI.items ?? []) {
          if (!item.fieldRef) throw new Error(`downwardAPI item ${item.path}: only fieldRef items are materialised`);
          const file = `${mount.mountPath}/${item.path}`;
          const value = rewriteFile(fieldValue(pod, item.fieldRef.fieldPath), insideMount, root);
          await writeAtomically(hostPath(file), value);
          files.set(file, hostPath(file));
        }
      } else {
        throw new Error(`volume ${mount.name}: projected source ${Object.keys(source).join(',')} is not materialised`);
      }
    }
  }

  await syncSecrets();

  const env: Record<string, string> = {};
  const rewrittenEnv: string[] = [];
  for (const e of container.env ?? []) {
    // The kubelet resolves a fieldRef against the stored Pod (AWS_ROLE_SESSION_NAME's metadata.name).
    const fieldPath = e.valueFrom?.fieldRef?.fieldPath;
    if (e.valueFrom && !fieldPath) throw new Error(`env ${e.name}: only fieldRef valueFrom is materialised`);
    const value = fieldPath ? fieldValue(pod, fieldPath) : (e.value ?? '');
    if (insideMount(value)) {
      env[e.name] = hostPath(value);
      rewrittenEnv.push(e.name);
    } else {
      env[e.name] = value;
    }
  }

  return {
    root,
    env,
    rewrittenEnv,
    files,
    tokens,
    async rotateToken(path) {
      const projected = tokens.find((t) => t.path === path);
      if (!projected) throw new Error(`no projected token at ${path}`);
      const token = await requestPodToken(cp, pod, projected.audience, projected.expirationSeconds);
      await writeAtomically(projected.hostPath, token);
      projected.token = token;
      return token;
    },
    syncSecrets,
  };
}

/** A token bound to the Pod, as the kubelet requests one for a projected volume. */
async function requestPodToken(
  cp: ControlPlane,
  pod: V1Pod,
  audience: string,
  expirationSeconds: number,
): Promise<string> {
  const core = cp.kubeConfig().makeApiClient(CoreV1Api);
  const res = await core.createNamespacedServiceAccountToken({
    namespace: pod.metadata!.namespace!,
    name: pod.spec!.serviceAccountName ?? 'default',
    body: {
      spec: {
        audiences: [audience],
        expirationSeconds,
        boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod.metadata!.name!, uid: pod.metadata!.uid! },
      },
    },
  });
  if (!res.status?.token) throw new Error(`TokenRequest for Pod ${pod.metadata!.name} returned no token`);
  return res.status.token;
}

/** The downward API's fieldRef paths a projected volume may use. */
function fieldValue(pod: V1Pod, fieldPath: string): string {
  const m = /^metadata\.(annotations|labels)\['(.+)'\]$/.exec(fieldPath);
  if (m) {
    const map = m[1] === 'annotations' ? pod.metadata?.annotations : pod.metadata?.labels;
    const value = map?.[m[2]];
    if (value === undefined) throw new Error(`fieldRef ${fieldPath}: the stored Pod has no such ${m[1].slice(0, -1)}`);
    return value;
  }
  switch (fieldPath) {
    case 'metadata.name':
      return pod.metadata!.name!;
    case 'metadata.namespace':
      return pod.metadata!.namespace!;
    case 'metadata.uid':
      return pod.metadata!.uid!;
    default:
      throw new Error(`fieldRef ${fieldPath} is not materialised`);
  }
}

/** The explicit path rewrites inside files: the token path of a GCP or AWS credential file. */
function rewriteFile(content: string, insideMount: (path: string) => boolean, root: string): string {
  if (/^\[(default|profile [^\]\n]+)\]\n/.test(content)) {
    return content.replace(/^(web_identity_token_file = )(\S+)$/gm, (line, key: string, path: string) =>
      insideMount(path) ? key + join(root, path) : line,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(content);
  } catch {
    return content;
  }
  const config = json as { type?: string; credential_source?: { file?: string } };
  const file = config?.credential_source?.file;
  if (config?.type !== 'external_account' || typeof file !== 'string' || !insideMount(file)) return content;
  const rewritten = JSON.stringify({
    ...config,
    credential_source: { ...config.credential_source, file: join(root, file) },
  });
  // Re-serialising must not change anything else: same keys, same order, same compact form.
  if (rewritten.replace(JSON.stringify(join(root, file)), JSON.stringify(file)) !== content) {
    throw new Error('the credential file is not compact JSON: the path rewrite would change other bytes');
  }
  return rewritten;
}

async function writeAtomically(path: string, content: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}`;
  await writeFile(tmp, content, { mode: 0o644 });
  await rename(tmp, path);
}
