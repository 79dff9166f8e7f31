// The rows of docs/compatibility.md the differential harness can meet, each as a function that
// checks its difference exactly on the two stored Pods and, if it is there, rewrites ours into the
// peer's form. A difference no row rewrites stays: it is unlisted.
import type { Container, Pod } from '../../src/kube/types.ts';
import { INJECTED_ANNOTATION } from '../../src/mutate/injection-record.ts';
import type { Stored } from './peer-diff-compare.ts';
import type { Answer, Peer, PeerConfig } from './peer-diff-model.ts';

export interface RowContext {
  peer: Peer;
  config: PeerConfig;
  /** The annotations of the Pod's ServiceAccount. */
  serviceAccount: Record<string, string>;
  /** The Pod both webhooks were sent. */
  input: Pod;
  ours: Answer;
  theirs: Answer;
}

export interface Row {
  id: string;
  peers: Peer[];
  /** Both Pods with this difference removed; undefined when the Pods do not show it. */
  explain(ours: Stored, theirs: Stored, ctx: RowContext): { ours: Stored; theirs: Stored } | undefined;
}

const admitted = (p: Stored): p is Pod => !('refused' in p);
const containersOf = (p: Pod): Container[] => [...(p.spec?.initContainers ?? []), ...(p.spec?.containers ?? [])];

export const ROWS: Row[] = [
  {
    id: 'injection-record',
    peers: ['aws', 'azure', 'pfnet'],
    explain(ours, theirs) {
      if (!admitted(ours) || !admitted(theirs)) return undefined;
      const ann = ours.metadata?.annotations;
      if (ann?.[INJECTED_ANNOTATION] === undefined || theirs.metadata?.annotations?.[INJECTED_ANNOTATION] !== undefined)
        return undefined;
      delete ann[INJECTED_ANNOTATION];
      if (Object.keys(ann).length === 0) delete ours.metadata!.annotations;
      return { ours, theirs };
    },
  },
  {
    // One volume mounted at the 0.8-1.5 path and at the 1.6 one; seen from the 1.6 mount it is the
    // peer's volume. Only that rewrite: anything else stays a difference.
    id: 'azure-token-both-layouts',
    peers: ['azure'],
    explain(ours, theirs) {
      if (!admitted(ours) || !admitted(theirs)) return undefined;
      const mine = ours.spec?.volumes?.find((v) => v.name === 'azure-identity-token');
      const peer = theirs.spec?.volumes?.find((v) => v.name.startsWith('azure-workload-identity-reserved-'));
      if (!mine || !peer) return undefined;
      mine.name = peer.name;
      const token = mine.projected?.sources?.[0]?.serviceAccountToken;
      if (token?.path !== 'azure-identity-token') return undefined;
      token.path = 'token/azure-identity-token';
      for (const c of containersOf(ours)) {
        const mounts = (c.volumeMounts ?? []).filter((m) => m.name === 'azure-identity-token');
        if (mounts.length === 0) continue;
        const paths = mounts.map((m) => m.mountPath).sort();
        if (paths.join() !== '/var/run/secrets/azure/tokens,/var/run/secrets/azure/wi/token') return undefined;
        c.volumeMounts = c.volumeMounts!.filter((m) => m.mountPath !== '/var/run/secrets/azure/tokens');
        for (const m of c.volumeMounts)
          if (m.name === 'azure-identity-token')
            Object.assign(m, { name: peer.name, mountPath: '/var/run/secrets/azure/wi' });
        for (const e of c.env ?? [])
          if (
            e.name === 'AZURE_FEDERATED_TOKEN_FILE' &&
            e.value === '/var/run/secrets/azure/tokens/azure-identity-token'
          )
            e.value = '/var/run/secrets/azure/wi/token/azure-identity-token';
      }
      return { ours, theirs };
    },
  },
  {
    id: 'gcp-google-cloud-project',
    peers: ['pfnet'],
    explain(ours, theirs) {
      if (!admitted(ours) || !admitted(theirs)) return undefined;
      let changed = false;
      const peerContainers = new Map(containersOf(theirs).map((c) => [c.name, c]));
      for (const c of containersOf(ours)) {
        const project = c.env?.find((e) => e.name === 'GOOGLE_CLOUD_PROJECT');
        if (!project || peerContainers.get(c.name)?.env?.some((e) => e.name === 'GOOGLE_CLOUD_PROJECT')) continue;
        // Only ours, and only with CLOUDSDK_CORE_PROJECT's value.
        if (c.env!.find((e) => e.name === 'CLOUDSDK_CORE_PROJECT')?.value !== project.value) return undefined;
        c.env = c.env!.filter((e) => e !== project);
        changed = true;
      }
      return changed ? { ours, theirs } : undefined;
    },
  },
  {
    // Our setup script reads its values from the environment ("$$NAME", $ doubled for the kubelet)
    // where pfnet's names them $(NAME); nothing else of the container may differ for this row.
    id: 'gcp-setup-script-env',
    peers: ['pfnet'],
    explain(ours, theirs) {
      if (!admitted(ours) || !admitted(theirs)) return undefined;
      const setup = (p: Pod) => p.spec?.initContainers?.find((c) => c.name === 'gcloud-setup');
      const [mine, peer] = [setup(ours), setup(theirs)];
      if (!mine || !peer) return undefined;
      const command = peer.command as string[] | undefined;
      if (command?.length !== 3) return undefined;
      const quoted = command[2].replace(/\$\((\w+)\)/g, (_m, name: string) => `"$$${name}"`);
      if (JSON.stringify(mine.command) !== JSON.stringify([...command.slice(0, 2), quoted])) return undefined;
      mine.command = peer.command;
      return { ours, theirs };
    },
  },
  {
    id: 'gcp-credentials-file-form',
    peers: ['pfnet'],
    explain(ours, theirs) {
      if (!admitted(ours) || !admitted(theirs)) return undefined;
      const key = 'cloud.google.com/external-credentials-json';
      const [a, b] = [ours.metadata?.annotations?.[key], theirs.metadata?.annotations?.[key]];
      if (a === undefined || b === undefined || a === b) return undefined;
      const mine = JSON.parse(a);
      if (mine.universe_domain !== 'googleapis.com') return undefined;
      delete mine.universe_domain;
      const sorted = (o: Record<string, unknown>) => JSON.stringify(o, Object.keys(o).sort());
      if (sorted(mine) !== sorted(JSON.parse(b))) return undefined;
      ours.metadata!.annotations![key] = b;
      return { ours, theirs };
    },
  },
  {
    // pfnet replaces these; we keep the container's own value, and say so in an admission warning.
    id: 'gcp-user-env-kept',
    peers: ['pfnet'],
    explain(ours, theirs, ctx) {
      if (!admitted(ours) || !admitted(theirs)) return undefined;
      let changed = false;
      const peerContainers = new Map(containersOf(theirs).map((c) => [c.name, c]));
      const inputContainers = new Map(containersOf(ctx.input).map((c) => [c.name, c]));
      for (const c of containersOf(ours)) {
        for (const name of ['GOOGLE_APPLICATION_CREDENTIALS', 'CLOUDSDK_CONFIG']) {
          const user = inputContainers.get(c.name)?.env?.find((e) => e.name === name);
          const mine = c.env?.find((e) => e.name === name);
          const peer = peerContainers.get(c.name)?.env?.find((e) => e.name === name);
          if (!user || !mine || !peer || mine.value !== user.value || peer.value === user.value) continue;
          const warned = ctx.ours.warnings?.some((w) => w.includes(`"${c.name}"`) && w.includes(name));
          if (!warned) return undefined;
          Object.assign(mine, peer);
          changed = true;
        }
      }
      return changed ? { ours, theirs } : undefined;
    },
  },
];
