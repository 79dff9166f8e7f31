// The MutatingAdmissionPolicy mode's objects: the parameter resource (a namespaced CRD, one object
// per namespace), the policy whose CEL places a ServiceAccount's precomputed pieces (./parameters.ts)
// into a Pod on CREATE, and its binding, whose paramRef names no namespace, so each Pod reads its
// own namespace's object. The CEL decides only what the Pod already has: the pieces themselves
// come from the webhook's core.

export const PARAMETERS_GROUP = 'workload-identity-webhook.io';
export const PARAMETERS_VERSION = 'v1alpha1';
const PARAMETERS_KIND = 'WorkloadIdentityParameters';
export const PARAMETERS_PLURAL = 'workloadidentityparameters';
/** The one parameter object of each namespace. */
export const PARAMETERS_NAME = 'workload-identity';
const POLICY_NAME = 'workload-identity-webhook';

const SKIP_POD_LABEL = 'workload-identity-webhook.io/skip';
const MIRROR_POD_ANNOTATION = 'kubernetes.io/config.mirror';

type Schema = Record<string, unknown>;
const str: Schema = { type: 'string' };
const strings: Schema = { type: 'array', items: str };
const stringMap: Schema = { type: 'object', additionalProperties: str };
const anyObject: Schema = { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
const anyObjects: Schema = { type: 'array', items: anyObject };
const envVar: Schema = {
  type: 'object',
  required: ['name'],
  properties: { name: str, value: str, valueFrom: anyObject },
};
const envGroups: Schema = { type: 'array', items: { type: 'array', items: envVar } };
const mount: Schema = {
  type: 'object',
  required: ['name', 'mountPath'],
  properties: { name: str, mountPath: str, readOnly: { type: 'boolean' }, subPath: str },
};

const injectionSchema: Schema = {
  type: 'object',
  required: [
    'provider',
    'skipAnnotation',
    'includeAnnotation',
    'separator',
    'mounts',
    'envGroups',
    'volumes',
    'initFirst',
    'initLast',
    'containersFirst',
    'containersLast',
    'annotations',
    'labels',
  ],
  properties: {
    provider: str,
    requireLabel: { type: 'object', required: ['key', 'value'], properties: { key: str, value: str } },
    skipLabel: str,
    skipAnnotation: str,
    includeAnnotation: str,
    separator: str,
    configuredBy: { type: 'array', items: strings },
    mounts: { type: 'array', items: mount },
    envGroups,
    containerEnvGroups: { type: 'object', additionalProperties: envGroups },
    envGuards: { type: 'object', additionalProperties: strings },
    volumes: anyObjects,
    initFirst: anyObjects,
    initLast: anyObjects,
    containersFirst: anyObjects,
    containersLast: anyObjects,
    annotations: stringMap,
    labels: stringMap,
  },
};

/** The parameter resource: written by the controller, read by the policy; nobody else needs it. */
function parametersCrd(): Record<string, unknown> {
  const injections: Schema = { type: 'array', items: injectionSchema };
  const account: Schema = {
    type: 'object',
    required: ['linux'],
    properties: { linux: injections, windows: injections },
  };
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${PARAMETERS_PLURAL}.${PARAMETERS_GROUP}` },
    spec: {
      group: PARAMETERS_GROUP,
      scope: 'Namespaced',
      names: {
        kind: PARAMETERS_KIND,
        plural: PARAMETERS_PLURAL,
        singular: 'workloadidentityparameters',
        listKind: `${PARAMETERS_KIND}List`,
      },
      versions: [
        {
          name: PARAMETERS_VERSION,
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description:
                "What each ServiceAccount of the namespace gives a Pod, rendered by workload-identity-webhook's controller from the ServiceAccounts (the policy mode); do not edit.",
              properties: {
                spec: {
                  type: 'object',
                  properties: {
                    listed: { type: 'integer' },
                    fallback: account,
                    serviceAccounts: { type: 'object', additionalProperties: account },
                  },
                },
              },
            },
          },
        },
      ],
    },
  };
}

/**
 * `name` bound to `value` in `body`: kube-apiserver's CEL for admission policies has no cel.bind,
 * so a one-element list's map binds it.
 */
const bind = (name: string, value: string, body: string) => `[${value}].map(${name}, ${body})[0]`;

/** A JSON Pointer token from a CEL string. */
const pointerToken = (s: string) => `${s}.replace('~', '~0').replace('/', '~1')`;

/** The operations for one container list: its containers' mounts and env, by index. */
function containerOps(list: 'initContainers' | 'containers'): string {
  const at = (k: string, field: string) => `'/spec/${list}/' + string(${k}) + '/${field}'`;
  const named = (key: string) => `variables.annotations[?i.${key}].orValue('').split(i.separator)`;
  const selected = [
    `!${named('skipAnnotation')}.exists(s, s.trim() == c.name)`,
    `(${named('includeAnnotation')}.all(s, s.trim() == '') || ${named('includeAnnotation')}.exists(s, s.trim() == c.name))`,
    '!(has(i.configuredBy) && i.configuredBy.all(g, g.exists(n, n in names)))',
  ].join(' && ');
  const groups =
    '(has(i.containerEnvGroups) && c.name in i.containerEnvGroups ? i.containerEnvGroups[c.name] : i.envGroups)';
  const userHas =
    'e.name in names || (has(i.envGuards) && e.name in i.envGuards && i.envGuards[e.name].exists(x, x in names))';
  const mountOps = `(size(mounts) == 0 ? [] : has(c.volumeMounts)
      ? mounts.map(m, JSONPatch{op: 'add', path: ${at('k', 'volumeMounts/-')}, value: m})
      : [JSONPatch{op: 'add', path: ${at('k', 'volumeMounts')}, value: mounts}])`;
  const envOps = `(size(env) == 0 ? [] : has(c.env)
      ? env.map(e, JSONPatch{op: 'add', path: ${at('k', 'env/-')}, value: e})
      : [JSONPatch{op: 'add', path: ${at('k', 'env')}, value: env}])`;
  const perContainer = bind(
    'names',
    'has(c.env) ? c.env.map(e, e.name) : []',
    bind(
      'sel',
      `variables.injections.filter(i, ${selected})`,
      bind(
        'mounts',
        'sel.map(i, i.mounts).flatten().filter(m, !(has(c.volumeMounts) && c.volumeMounts.exists(x, x.mountPath == m.mountPath)))',
        bind(
          'env',
          `sel.map(i, ${groups}.filter(g, !g.exists(e, ${userHas}))).flatten().flatten()`,
          `${mountOps} + ${envOps}`,
        ),
      ),
    ),
  );
  return `(has(object.spec.${list}) ? lists.range(size(object.spec.${list})).map(k, ${bind(
    'c',
    `object.spec.${list}[k]`,
    `c.name in variables.own ? [] : ${perContainer}`,
  )}).flatten() : [])`;
}

/**
 * Members of metadata.annotations or metadata.labels, the map added first when the Pod has none.
 * A member the Pod has already keeps its value: the Pod's own, or the webhook's in mode `both`.
 */
function memberOps(field: 'annotations' | 'labels'): string {
  return bind(
    'members',
    `variables.injections.map(i, i.${field}.map(k, [k, i.${field}[k]])).flatten().filter(p, !(p[0] in variables.${field}))`,
    `(size(members) > 0 && !has(object.metadata.${field}) ? [JSONPatch{op: 'add', path: '/metadata/${field}', value: {}}] : []) +
  members.map(p, JSONPatch{op: 'add', path: '/metadata/${field}/' + ${pointerToken('p[0]')}, value: p[1]})`,
  );
}

/** Whole containers (setup and added ones) before and after a list's own, unless one of that name is there. */
function addedOps(list: 'initContainers' | 'containers', first: string, last: string): string {
  const absent = (field: string) =>
    `variables.injections.map(i, i.${field}).flatten().filter(c, !(has(object.spec.${list}) && object.spec.${list}.exists(x, x.name == c.name)))`;
  const ops = `size(first) + size(last) == 0 ? [] : !has(object.spec.${list}) ? [JSONPatch{op: 'add', path: '/spec/${list}', value: first + last}] :
  last.map(c, JSONPatch{op: 'add', path: '/spec/${list}/-', value: c}) +
  lists.range(size(first)).map(j, JSONPatch{op: 'add', path: '/spec/${list}/0', value: first[size(first) - 1 - j]})`;
  return bind('first', absent(first), bind('last', absent(last), ops));
}

const VOLUME_OPS = bind(
  'vols',
  'variables.injections.map(i, i.volumes).flatten().filter(v, !(has(object.spec.volumes) && object.spec.volumes.exists(x, x.name == v.name)))',
  `size(vols) == 0 ? [] : has(object.spec.volumes)
    ? vols.map(v, JSONPatch{op: 'add', path: '/spec/volumes/-', value: v})
    : [JSONPatch{op: 'add', path: '/spec/volumes', value: vols}]`,
);

const VARIABLES = [
  {
    name: 'saName',
    expression:
      "has(object.spec.serviceAccountName) && object.spec.serviceAccountName != '' ? object.spec.serviceAccountName : has(object.spec.serviceAccount) && object.spec.serviceAccount != '' ? object.spec.serviceAccount : 'default'",
  },
  {
    name: 'windows',
    expression:
      "(has(object.spec.os) && object.spec.os.name == 'windows') || (has(object.spec.nodeSelector) && ['kubernetes.io/os', 'beta.kubernetes.io/os'].exists(k, object.spec.nodeSelector[?k].orValue('') == 'windows'))",
  },
  { name: 'labels', expression: 'has(object.metadata.labels) ? object.metadata.labels : {}' },
  { name: 'annotations', expression: 'has(object.metadata.annotations) ? object.metadata.annotations : {}' },
  {
    name: 'account',
    expression:
      '(has(params.spec.serviceAccounts) ? params.spec.serviceAccounts[?variables.saName] : optional.none()).or(params.spec.?fallback)',
  },
  {
    name: 'injections',
    expression: `!variables.account.hasValue() ? [] :
  (variables.windows && has(variables.account.value().windows) ? variables.account.value().windows : variables.account.value().linux)
  .filter(i, (!has(i.requireLabel) || variables.labels[?i.requireLabel.key].orValue('') == i.requireLabel.value) && (!has(i.skipLabel) || !(i.skipLabel in variables.labels)))`,
  },
  {
    // Containers the injections add whole: never mutated, as the webhook leaves its own alone.
    name: 'own',
    expression:
      'variables.injections.map(i, i.initFirst + i.initLast + i.containersFirst + i.containersLast).flatten().map(c, c.name)',
  },
];

/** The policy: every operation in one JSONPatch, container edits (by index) before any insertion. */
function mutatingPolicy(): Record<string, unknown> {
  const expression = [
    containerOps('initContainers'),
    containerOps('containers'),
    VOLUME_OPS,
    memberOps('annotations'),
    memberOps('labels'),
    addedOps('initContainers', 'initFirst', 'initLast'),
    addedOps('containers', 'containersFirst', 'containersLast'),
  ].join(' +\n');
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingAdmissionPolicy',
    metadata: { name: POLICY_NAME },
    spec: {
      paramKind: { apiVersion: `${PARAMETERS_GROUP}/${PARAMETERS_VERSION}`, kind: PARAMETERS_KIND },
      matchConstraints: {
        resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }],
      },
      matchConditions: [
        {
          name: 'not-skipped',
          expression: `!has(object.metadata.labels) || !('${SKIP_POD_LABEL}' in object.metadata.labels)`,
        },
        {
          // The API server refuses mirror Pods that reference a ServiceAccount token.
          name: 'not-a-mirror-pod',
          expression: `!has(object.metadata.annotations) || !('${MIRROR_POD_ANNOTATION}' in object.metadata.annotations)`,
        },
      ],
      failurePolicy: 'Fail',
      reinvocationPolicy: 'IfNeeded',
      variables: VARIABLES,
      mutations: [{ patchType: 'JSONPatch', jsonPatch: { expression } }],
    },
  };
}

/** The binding: each Pod's own namespace's parameter object; a namespace without one is left alone. */
function policyBinding(): Record<string, unknown> {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingAdmissionPolicyBinding',
    metadata: { name: POLICY_NAME },
    spec: {
      policyName: POLICY_NAME,
      paramRef: { name: PARAMETERS_NAME, parameterNotFoundAction: 'Allow' },
    },
  };
}

/**
 * The parameter object of one namespace, as the controller applies it. An empty map is left out:
 * an apply stores `{}` as null, which the schema refuses.
 */
export function parametersObject(
  namespace: string,
  spec: { listed: number; serviceAccounts: Record<string, unknown>; fallback?: unknown },
): Record<string, unknown> {
  const { serviceAccounts, ...rest } = spec;
  return {
    apiVersion: `${PARAMETERS_GROUP}/${PARAMETERS_VERSION}`,
    kind: PARAMETERS_KIND,
    metadata: { name: PARAMETERS_NAME, namespace },
    spec: Object.keys(serviceAccounts).length > 0 ? spec : rest,
  };
}

/** The chart's copy of the objects (files/policy-mode.json, scripts/policy-mode-chart.ts writes it). */
export function policyModeChartFile(): string {
  return `${JSON.stringify({ crd: parametersCrd(), policy: mutatingPolicy(), binding: policyBinding() }, null, 2)}\n`;
}
