// node bench/heap-retainers.ts FILE.heapsnapshot [--top N]: where a heap snapshot's memory goes.
// Computes the dominator tree (Cooper, Harvey and Kennedy's iterative algorithm; weak edges do not
// retain) and prints: the biggest retainers (objects by retained size), the heap by package (each
// object charged to the script of the nearest function that dominates it: the code and data only
// that package's functions keep alive), and the heap by kind of object.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values: opts, positionals } = parseArgs({
  allowPositionals: true,
  options: { top: { type: 'string', default: '25' } },
});
const TOP = Number(opts.top);
if (positionals.length !== 1) throw new Error('usage: node bench/heap-retainers.ts FILE.heapsnapshot [--top N]');

interface Snapshot {
  snapshot: {
    meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]] };
  };
  nodes: number[];
  edges: number[];
  strings: string[];
}
const snap = JSON.parse(readFileSync(positionals[0], 'utf8')) as Snapshot;
const meta = snap.snapshot.meta;
const NF = meta.node_fields.length;
const EF = meta.edge_fields.length;
const [F_TYPE, F_NAME, F_SIZE, F_EDGES] = ['type', 'name', 'self_size', 'edge_count'].map((f) =>
  meta.node_fields.indexOf(f),
);
const nodeTypes = meta.node_types[0];
const edgeTypes = meta.edge_types[0];
const { nodes, edges, strings } = snap;
const n = nodes.length / NF;
const WEAK = edgeTypes.indexOf('weak');
const SHORTCUT = edgeTypes.indexOf('shortcut');
const firstEdge = new Uint32Array(n + 1);
for (let i = 0, e = 0; i < n; i++) {
  firstEdge[i] = e;
  e += nodes[i * NF + F_EDGES] * EF;
  firstEdge[i + 1] = e;
}
const typeOf = (i: number) => nodeTypes[nodes[i * NF + F_TYPE]];
const nameOf = (i: number) => strings[nodes[i * NF + F_NAME]];
const selfSize = (i: number) => nodes[i * NF + F_SIZE];
const edgeName = (e: number) => {
  const t = edgeTypes[edges[e]];
  return t === 'element' || t === 'hidden' ? String(edges[e + 1]) : strings[edges[e + 1]];
};
const retains = (e: number) => edges[e] !== WEAK && edges[e] !== SHORTCUT;

// Postorder from the root (node 0), iteratively.
const order = new Int32Array(n).fill(-1); // node -> postorder index
const byOrder = new Int32Array(n); // postorder index -> node
let count = 0;
{
  const stack = new Int32Array(n);
  const cursor = new Uint32Array(n);
  const seen = new Uint8Array(n);
  let sp = 0;
  stack[sp++] = 0;
  seen[0] = 1;
  cursor[0] = firstEdge[0];
  while (sp > 0) {
    const v = stack[sp - 1];
    if (cursor[v] < firstEdge[v + 1]) {
      const e = cursor[v];
      cursor[v] += EF;
      if (!retains(e)) continue;
      const w = edges[e + 2] / NF;
      if (!seen[w]) {
        seen[w] = 1;
        cursor[w] = firstEdge[w];
        stack[sp++] = w;
      }
    } else {
      sp--;
      order[v] = count;
      byOrder[count++] = v;
    }
  }
}

// Predecessors (reachable ones only), as a CSR list.
const predCount = new Uint32Array(n + 1);
for (let v = 0; v < n; v++) {
  if (order[v] < 0) continue;
  for (let e = firstEdge[v]; e < firstEdge[v + 1]; e += EF) if (retains(e)) predCount[edges[e + 2] / NF + 1]++;
}
for (let i = 0; i < n; i++) predCount[i + 1] += predCount[i];
const preds = new Int32Array(predCount[n]);
{
  const fill = predCount.slice();
  for (let v = 0; v < n; v++) {
    if (order[v] < 0) continue;
    for (let e = firstEdge[v]; e < firstEdge[v + 1]; e += EF) if (retains(e)) preds[fill[edges[e + 2] / NF]++] = v;
  }
}

// Immediate dominators, over postorder indices (the root has the highest).
const ROOT = count - 1;
const idom = new Int32Array(count).fill(-1);
idom[ROOT] = ROOT;
const intersect = (a: number, b: number) => {
  while (a !== b) {
    while (a < b) a = idom[a];
    while (b < a) b = idom[b];
  }
  return a;
};
for (let changed = true; changed; ) {
  changed = false;
  for (let o = ROOT - 1; o >= 0; o--) {
    const v = byOrder[o];
    let d = -1;
    for (let p = predCount[v]; p < predCount[v + 1]; p++) {
      const po = order[preds[p]];
      if (idom[po] === -1) continue;
      d = d === -1 ? po : intersect(po, d);
    }
    if (d !== -1 && idom[o] !== d) {
      idom[o] = d;
      changed = true;
    }
  }
}

// Retained sizes: children come before their dominator in postorder.
const retained = new Float64Array(count);
for (let o = 0; o < count; o++) retained[o] += selfSize(byOrder[o]);
for (let o = 0; o < ROOT; o++) retained[idom[o]] += retained[o];
const total = retained[ROOT];

// The script each function belongs to: a SharedFunctionInfo's `script` edge, a closure's `shared`.
const scriptOf = new Map<number, string>();
const edgeTo = (v: number, name: string) => {
  for (let e = firstEdge[v]; e < firstEdge[v + 1]; e += EF) if (edgeName(e) === name) return edges[e + 2] / NF;
  return -1;
};
for (let v = 0; v < n; v++) {
  const t = typeOf(v);
  if (t !== 'code' && t !== 'closure') continue;
  const sfi = t === 'closure' ? edgeTo(v, 'shared') : v;
  const script = sfi >= 0 ? edgeTo(sfi, 'script') : -1;
  if (script >= 0 && nameOf(script)) {
    scriptOf.set(v, nameOf(script));
    // The script itself (its source text above all) belongs to its package too.
    scriptOf.set(script, nameOf(script));
    const source = edgeTo(script, 'source');
    if (source >= 0) scriptOf.set(source, nameOf(script));
  }
}
const packageOf = (url: string) => {
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm) return nm[1];
  if (url.startsWith('node:')) return 'node (built-in modules)';
  const src = /\/(src|dist)\/(.*?)(?:\/[^/]*)?$/.exec(url);
  return src ? `this project: ${src[1]}/${src[2] || '.'}` : url || '(unknown)';
};
// Top-down over the dominator tree (the root last in postorder, so walk backwards).
const owner: string[] = new Array(count);
owner[ROOT] = '(not owned by any function: roots, shared structures)';
const byPackage = new Map<string, number>();
for (let o = ROOT - 1; o >= 0; o--) {
  const v = byOrder[o];
  const url = scriptOf.get(v);
  owner[o] = url ? packageOf(url) : owner[idom[o]];
  byPackage.set(owner[o], (byPackage.get(owner[o]) ?? 0) + selfSize(v));
}
let sources = 0;
for (const [v, url] of scriptOf) if (typeOf(v) === 'string' && url) sources += selfSize(v);
const byKind = new Map<string, number>();
for (let o = 0; o < count; o++) {
  const v = byOrder[o];
  const t = typeOf(v);
  const k = t === 'object' || t === 'closure' || t === 'hidden' || t === 'code' ? `${t}: ${nameOf(v).slice(0, 50)}` : t;
  byKind.set(k, (byKind.get(k) ?? 0) + selfSize(v));
}

const mib = (b: number) => `${(b / 2 ** 20).toFixed(2).padStart(7)} MiB`;
const pct = (b: number) => `${((b / total) * 100).toFixed(1).padStart(5)} %`;
console.log(`heap reachable: ${mib(total)} in ${count} objects (of ${n} in the snapshot)`);
const retainerPath = (o: number) => {
  const names: string[] = [];
  for (let p = o; p !== ROOT && names.length < 4; p = idom[p]) names.unshift(nameOf(byOrder[p]).slice(0, 40));
  return names.join(' < ');
};
console.log(`\nbiggest retainers (objects whose own subtree is large, not nested in a bigger one listed):`);
const candidates = Array.from({ length: ROOT }, (_, o) => o)
  .filter((o) => retained[o] > total / 200 && !['synthetic'].includes(typeOf(byOrder[o])))
  .sort((a, b) => retained[b] - retained[a]);
let shown = 0;
for (const o of candidates) {
  if (shown >= TOP) break;
  shown++;
  const v = byOrder[o];
  console.log(
    `${mib(retained[o])} ${pct(retained[o])}  ${typeOf(v)} ${JSON.stringify(nameOf(v).slice(0, 60))}  [${owner[o]}]  dominated by: ${retainerPath(idom[o])}`,
  );
}
console.log('\nheap by package (self sizes charged to the nearest dominating function):');
for (const [k, b] of [...byPackage].sort((a, b) => b[1] - a[1]).slice(0, TOP)) console.log(`${mib(b)} ${pct(b)}  ${k}`);
console.log(
  `\nsource text of the scripts loaded: ${mib(sources)} (of it external, outside the JavaScript heap: what V8 holds as external strings)`,
);
console.log('\nheap by kind of object:');
for (const [k, b] of [...byKind].sort((a, b) => b[1] - a[1]).slice(0, TOP)) console.log(`${mib(b)} ${pct(b)}  ${k}`);
