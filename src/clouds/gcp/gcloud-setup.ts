// pfnet's gcloud mode: the setup init container that writes the credential file and logs gcloud
// in, and its script (pfnet's own, recognised in a Pod pfnet's webhook served first, and ours).
import type { Container } from '../../kube/types.ts';
import { kubeletLiteral, shellVariable } from '../../shell.ts';
import { envVar, GCP_CREDENTIALS_FILE, GCP_MOUNT_PATH, GCP_TOKEN_FILE, GCP_VOLUME_NAME } from './conventions.ts';
import { PFNET } from './facts.ts';

/**
 * pfnet's setup script, byte for byte (its heredoc.Docf output): recognised in a Pod pfnet's
 * webhook served first, never written.
 */
export const PFNET_SETUP_SCRIPT = [
  'gcloud iam workload-identity-pools create-cred-config \\',
  '  $(GCP_WORKLOAD_IDENTITY_PROVIDER) \\',
  '  --service-account=$(GCP_SERVICE_ACCOUNT) \\',
  `  --output-file=$(CLOUDSDK_CONFIG)/${GCP_CREDENTIALS_FILE} \\`,
  `  --credential-source-file=${GCP_MOUNT_PATH}/${GCP_TOKEN_FILE}`,
  `gcloud auth login --cred-file=$(CLOUDSDK_CONFIG)/${GCP_CREDENTIALS_FILE}`,
  '',
].join('\n');

const CREDENTIALS_PATH = `${shellVariable('CLOUDSDK_CONFIG')}/${GCP_CREDENTIALS_FILE}`;

/**
 * The setup script: pfnet's commands with one change. pfnet writes `$(GCP_WORKLOAD_IDENTITY_PROVIDER)`,
 * which the kubelet replaces with the value before `sh` reads the script, so a value was shell
 * syntax (`...providers/x;id>F;#` ran `id`). Here the shell reads each value from the container's
 * environment as one quoted word, and every $ is escaped for the kubelet (src/shell.ts): the script
 * `sh` runs is this text, whatever the annotations hold.
 */
const GCLOUD_SETUP_SCRIPT = kubeletLiteral(
  [
    'gcloud iam workload-identity-pools create-cred-config \\',
    `  ${shellVariable('GCP_WORKLOAD_IDENTITY_PROVIDER')} \\`,
    `  --service-account=${shellVariable('GCP_SERVICE_ACCOUNT')} \\`,
    `  --output-file=${CREDENTIALS_PATH} \\`,
    `  --credential-source-file=${GCP_MOUNT_PATH}/${GCP_TOKEN_FILE}`,
    `gcloud auth login --cred-file=${CREDENTIALS_PATH}`,
    '',
  ].join('\n'),
);

/**
 * pfnet's gcloud setup init container (mutatepod_parts.go gcloudSetupContainer, same arguments):
 * it writes the credential file and logs gcloud in. Runs under the Restricted Pod Security
 * Standard, as pfnet's does.
 */
export function gcloudSetupContainer(
  workloadIdentityProvider: string,
  serviceAccountEmail: string,
  project: string | undefined,
  image: string,
  runAsUser: number | undefined,
  resources: Record<string, unknown> | undefined,
): Container {
  const setup: Container = {
    name: PFNET.setupContainer,
    image,
    command: ['sh', '-c', GCLOUD_SETUP_SCRIPT],
    volumeMounts: [
      { name: GCP_VOLUME_NAME, mountPath: GCP_MOUNT_PATH, readOnly: true },
      { name: PFNET.configVolume, mountPath: PFNET.configMountPath },
    ],
    env: [
      envVar('GCP_WORKLOAD_IDENTITY_PROVIDER', workloadIdentityProvider),
      envVar('GCP_SERVICE_ACCOUNT', serviceAccountEmail),
      { name: 'CLOUDSDK_CONFIG', value: PFNET.configMountPath },
      // Empty when the email names no project, as pfnet writes it (projectEnvVar).
      envVar('CLOUDSDK_CORE_PROJECT', project ?? ''),
    ],
    securityContext: {
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      ...(runAsUser !== undefined ? { runAsUser } : {}),
    },
  };
  if (resources) setup.resources = resources;
  return setup;
}
