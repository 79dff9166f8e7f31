// The differential harness's vocabulary, shared by the harness and its rows.
import type jsonpatch from 'fast-json-patch';

export type Peer = 'aws' | 'azure' | 'pfnet';
export type Cloud = 'aws' | 'azure' | 'gcp';

/** One configuration: the peer's flags (and environment) and ours that mean the same. */
export interface PeerConfig {
  id: string;
  peer: Peer;
  peerArgs: string[];
  peerEnv?: Record<string, string>;
  ourArgs: string[];
}

/** What a webhook answered for one review: a JSON Patch, or a refusal. */
export interface Answer {
  allowed: boolean;
  patch?: jsonpatch.Operation[];
  message?: string;
  warnings?: string[];
}
