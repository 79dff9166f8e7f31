// The differential harness as one command (npm run peer-diff): the three peers' binaries
// (scripts/provide-peers.sh) beside `serve` on one kube-apiserver, the corpus of
// test/fixtures/peer-diff/corpus through both, and the table of identical / listed / unlisted Pods
// per peer and configuration. Exit 1 when a Pod differs in a way docs/compatibility.md does not list.
//
//   npm run peer-diff [-- --peers aws,azure,pfnet] [--record]
//
// --record also writes each peer's answers to test/fixtures/peer-diff/recorded/<peer>.yaml, which
// test/e2e/peer-diff.test.ts judges against where a peer's binary cannot be built here.
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startControlPlane } from '../test/harness/control-plane.ts';
import { CONFIGS, formatReport, providePeers, runPeerDiff, type Peer } from '../test/support/peer-diff.ts';

const CACHE =
  process.env.WIW_CACHE_DIR ??
  join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'workload-identity-webhook');

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: { peers: { type: 'string', default: 'aws,azure,pfnet' }, record: { type: 'boolean', default: false } },
  });
  const peers = values.peers.split(',').map((p) => p.trim()) as Peer[];
  const vars = providePeers(peers);
  const binaries = Object.fromEntries(peers.map((p) => [p, vars[`${p.toUpperCase()}_PEER`]]));
  const versions = Object.fromEntries(peers.map((p) => [p, vars[`${p.toUpperCase()}_PEER_VERSION`]])) as Record<
    Peer,
    string
  >;
  const cp = await startControlPlane({ name: 'peer-diff' });
  try {
    const reports = await runPeerDiff({
      cp,
      binaries,
      versions,
      record: values.record,
      configs: CONFIGS.filter((c) => peers.includes(c.peer)),
      lockDir: CACHE,
    });
    console.log(formatReport(reports));
    return reports.some((r) => r.pods.some((p) => p.outcome.kind === 'unlisted')) ? 1 : 0;
  } finally {
    await cp.stop();
  }
}

process.exitCode = await main();
