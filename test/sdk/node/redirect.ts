// Preloaded (`node --import`) into an SDK child process: the only change to its world besides the
// test CA (NODE_EXTRA_CA_CERTS). The cloud host names resolve to the loopback stand-in; any other
// name fails to resolve and any connection off loopback fails, so nothing leaves the machine
// (no metadata-server probes either). It also lets the test move the clock forward: time passing
// is how an SDK decides to refresh.
import dns from 'node:dns';
import net from 'node:net';
import { syncBuiltinESMExports } from 'node:module';

const address = process.env.WIW_SDK_STANDIN_ADDRESS;
const hosts = new Set((process.env.WIW_SDK_STANDIN_HOSTS ?? '').split(',').filter(Boolean));
if (!address || hosts.size === 0) throw new Error('WIW_SDK_STANDIN_ADDRESS and WIW_SDK_STANDIN_HOSTS must be set');

type Target = { address: string } | 'system' | undefined;
function targetOf(hostname: string): Target {
  const name = hostname.toLowerCase().replace(/\.$/, '');
  if (hosts.has(name)) return { address: address! };
  if (net.isIP(name) || name === 'localhost') return 'system';
  process.stderr.write(`redirect: refused to resolve ${hostname}\n`);
  return undefined;
}

function notFound(hostname: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), {
    code: 'ENOTFOUND',
    errno: -3008,
    syscall: 'getaddrinfo',
    hostname,
  });
}

const systemLookup = dns.lookup;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
function lookup(hostname: string, options: any, callback?: any): void {
  if (typeof options === 'function') [callback, options] = [options, {}];
  if (typeof options === 'number') options = { family: options };
  const target = targetOf(hostname);
  if (target === 'system') return void Reflect.apply(systemLookup, dns, [hostname, options, callback]);
  if (target === undefined) return void process.nextTick(callback, notFound(hostname));
  if (options?.all) process.nextTick(callback, null, [{ address: target.address, family: 4 }]);
  else process.nextTick(callback, null, target.address, 4);
}
(dns as { lookup: unknown }).lookup = lookup;

const systemPromiseLookup = dns.promises.lookup;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function promiseLookup(hostname: string, options?: any): Promise<any> {
  const target = targetOf(hostname);
  if (target === 'system') return Reflect.apply(systemPromiseLookup, dns.promises, [hostname, options]);
  if (target === undefined) throw notFound(hostname);
  const opts = typeof options === 'number' ? { family: options } : options;
  return opts?.all ? [{ address: target.address, family: 4 }] : { address: target.address, family: 4 };
}
(dns.promises as { lookup: unknown }).lookup = promiseLookup;
syncBuiltinESMExports();

// Connections by IP address skip the lookup: fail every one that is not loopback (or the stand-in).
const connect = net.Socket.prototype.connect;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
net.Socket.prototype.connect = function guardedConnect(this: net.Socket, ...args: any[]): net.Socket {
  const first = Array.isArray(args[0]) ? args[0][0] : args[0];
  const options =
    typeof first === 'object' && first !== null
      ? first
      : { port: first, host: typeof args[1] === 'string' ? args[1] : undefined };
  // A unix socket has a `path`; http's agent sets path: null for TCP.
  const host: string | undefined = options.path == null ? (options.host ?? options.hostname) : undefined;
  // The stand-in's own address is off loopback when the SDK runs in a Pod (test/e2e/node-e2e.test.ts).
  if (host && net.isIP(host) && !isLoopback(host) && host !== address) {
    process.stderr.write(`redirect: blocked a connection to ${host}\n`);
    // What a host without a route there sees.
    const err = Object.assign(new Error(`connect ENETUNREACH ${host}:${options.port} (blocked off loopback)`), {
      code: 'ENETUNREACH',
      errno: -101,
      syscall: 'connect',
      address: host,
      port: options.port,
    });
    process.nextTick(() => this.destroy(err));
    return this;
  }
  return connect.apply(this, args as Parameters<typeof connect>);
} as typeof connect;

function isLoopback(ip: string): boolean {
  return ip.startsWith('127.') || ip === '::1' || ip.startsWith('::ffff:127.');
}

// The clock: `advanceClock(seconds)` makes Date (Date.now, new Date(), Date()) run ahead.
let offsetMs = 0;
const RealDate = Date;
const ShiftedDate = new Proxy(RealDate, {
  construct: (target, args, newTarget) =>
    args.length === 0
      ? Reflect.construct(target, [RealDate.now() + offsetMs], newTarget)
      : Reflect.construct(target, args, newTarget),
  apply: () => new RealDate(RealDate.now() + offsetMs).toString(),
  get: (target, prop, receiver) =>
    prop === 'now' ? () => RealDate.now() + offsetMs : Reflect.get(target, prop, receiver),
});
(globalThis as Record<symbol, unknown>)[Symbol.for('wiw.sdk.advanceClock')] = (seconds: number): void => {
  offsetMs += seconds * 1000;
  globalThis.Date = ShiftedDate;
};
