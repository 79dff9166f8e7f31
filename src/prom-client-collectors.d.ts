// prom-client's default collectors, one module each (lib/metrics/*.js): src/process-metrics.ts
// takes all but the event-loop one. prom-client ships no types for them.
declare module 'prom-client/lib/metrics/*.js' {
  import type { Registry } from 'prom-client';
  const collect: (registry: Registry, config: object) => void;
  export default collect;
}
