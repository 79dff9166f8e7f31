{{/* Names */}}
{{- define "wiw.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "wiw.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "wiw.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "wiw.labels" -}}
helm.sh/chart: {{ include "wiw.chart" . }}
app.kubernetes.io/name: {{ include "wiw.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: workload-identity-webhook
{{- end }}

{{/* Selector labels of the webhook Pods. */}}
{{- define "wiw.selectorLabels" -}}
app.kubernetes.io/name: {{ include "wiw.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end }}

{{- define "wiw.tokenRequestor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "wiw.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: token-requestor
{{- end }}

{{- define "wiw.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "wiw.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "wiw.tokenRequestor.fullname" -}}
{{- printf "%s-token-requestor" (include "wiw.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "wiw.tokenRequestor.serviceAccountName" -}}
{{- if .Values.tokenRequestor.serviceAccount.create }}
{{- default (include "wiw.tokenRequestor.fullname" .) .Values.tokenRequestor.serviceAccount.name }}
{{- else }}
{{- required "tokenRequestor.serviceAccount.name is required when tokenRequestor.serviceAccount.create is false" .Values.tokenRequestor.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "wiw.tokenRequestor.leaseName" -}}
{{- default (include "wiw.tokenRequestor.fullname" .) .Values.tokenRequestor.leaseName }}
{{- end }}

{{- define "wiw.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The Secret holding the serving certificate, per certificate mode. */}}
{{- define "wiw.certSecretName" -}}
{{- $c := .Values.certificates }}
{{- if eq $c.mode "selfManaged" }}
{{- default (printf "%s-certs" (include "wiw.fullname" .)) $c.selfManaged.secretName }}
{{- else if eq $c.mode "certManager" }}
{{- printf "%s-tls" (include "wiw.fullname" .) }}
{{- else if eq $c.mode "provided" }}
{{- required "certificates.provided.secretName is required with certificates.mode=provided" $c.provided.secretName }}
{{- else }}
{{- fail (printf "certificates.mode=%q: expected selfManaged, certManager or provided" $c.mode) }}
{{- end }}
{{- end }}

{{/* DNS names the API server may use for the Service, plus the url's host when one is set. */}}
{{- define "wiw.servingHosts" -}}
{{- $svc := include "wiw.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- $hosts := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.clusterDomain) }}
{{- with .Values.webhook.url }}
{{- $host := regexReplaceAll ":[0-9]+$" (urlParse .).host "" | trimPrefix "[" | trimSuffix "]" }}
{{- $hosts = prepend $hosts $host }}
{{- end }}
{{- join "," $hosts }}
{{- end }}

{{/*
config key -> flag of `workload-identity-webhook serve`; the container gets WIW_<FLAG>.
test/e2e/chart.test.ts checks this table against src/config.ts, so a new flag cannot be missed.
*/}}
{{- define "wiw.configFlags" -}}
host: host
port: port
metricsPort: metrics-port
metricsHost: metrics-host
metricsNamespaceLabel: metrics-namespace-label
drainSeconds: drain-seconds
logLevel: log-level
logFormat: log-format
cacheMissTimeoutMs: cache-miss-timeout-ms
cacheMissRate: cache-miss-reads-per-second
slippedPodsIntervalSeconds: slipped-pods-interval-seconds
strict: strict
awsAnnotationPrefix: aws-annotation-prefix
awsDefaultRegion: aws-default-region
awsAudience: aws-audience
awsTokenExpiration: aws-token-expiration
awsStsRegionalEndpoints: aws-sts-regional-endpoints
awsRoleSessionName: aws-role-session-name
awsComposeRoleArn: aws-compose-role-arn
awsComposeRoleArnAccount: aws-compose-role-arn-account
awsComposeRoleArnPartition: aws-compose-role-arn-partition
awsContainerCredentialsAudience: aws-container-credentials-audience
awsContainerCredentialsFullUri: aws-container-credentials-full-uri
awsContainerCredentialsTokenMountPath: aws-container-credentials-token-mount-path
awsContainerCredentialsTokenVolumeName: aws-container-credentials-token-volume-name
awsContainerCredentialsTokenPath: aws-container-credentials-token-path
azureTenantId: azure-tenant-id
azureCloud: azure-cloud
azureAudience: azure-audience
azureTokenExpiration: azure-token-expiration
azureProxyImage: azure-proxy-image
azureProxyInitImage: azure-proxy-init-image
azureProxyNativeSidecar: azure-proxy-native-sidecar
azureProxyLogLevel: azure-proxy-log-level
gcpDefaultRegion: gcp-default-region
gcpAudience: gcp-audience
gcpTokenExpiration: gcp-token-expiration
gcpGcloudImage: gcp-gcloud-image
gcpFileMode: gcp-file-mode
gcpSetupContainerResources: gcp-setup-container-resources
gcpDefaultInjectionMode: gcp-default-injection-mode
gcpDirectGcloud: gcp-direct-gcloud
gcpAllowedTokenUrls: gcp-allowed-token-urls
secretTokenPath: secret-token-path
watchPolicies: watch-policies
policyFailureMode: policy-failure-mode
tlsMinVersion: tls-min-version
tlsCipherSuites: tls-cipher-suites
maxRequestBytes: max-request-bytes
maxInflightRequestBytes: max-inflight-request-bytes
maxContainers: max-containers
maxPatchBytes: max-patch-bytes
maxConnections: max-connections
maxConnectionsPerSource: max-connections-per-source
firstRequestTimeoutMs: first-request-timeout-ms
proxySources: proxy-sources
http2: http2
maxConcurrentStreams: max-concurrent-streams
maxConnectionAgeSeconds: max-connection-age-seconds
{{- end }}

{{/* tokenRequestor.config key -> flag of `workload-identity-webhook token-requestor`. */}}
{{- define "wiw.tokenRequestorFlags" -}}
leaseDurationSeconds: lease-duration-seconds
tokenExpiration: token-expiration
{{- end }}

{{/* A value as a flag string: YAML numbers arrive as float64, which would print as 3.1536e+07. */}}
{{- define "wiw.flagValue" -}}
{{- if kindIs "slice" . }}{{ join "," . }}
{{- else if kindIs "float64" . }}{{ int64 . }}
{{- else }}{{ toString . }}
{{- end }}
{{- end }}

{{- define "wiw.envName" -}}
{{- printf "WIW_%s" (. | upper | replace "-" "_") }}
{{- end }}

{{/* WIW_* variables from a map of values (dict "values" MAP "flags" TABLE "prefix" "config"). */}}
{{- define "wiw.envFrom" -}}
{{- $flags := .flags | fromYaml }}
{{- range $key, $value := .values }}
{{- $flag := get $flags $key }}
{{- if not $flag }}
{{- fail (printf "%s.%s is not a setting of this chart version" $.prefix $key) }}
{{- end }}
{{- if and (not (kindIs "invalid" $value)) (ne (include "wiw.flagValue" $value) "") }}
- name: {{ include "wiw.envName" $flag }}
  value: {{ include "wiw.flagValue" $value | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/* The webhook container's environment: config, the policy file, then the certificate source. */}}
{{- define "wiw.env" -}}
{{ include "wiw.envFrom" (dict "values" .Values.config "flags" (include "wiw.configFlags" .) "prefix" "config") }}
- name: WIW_FAILURE_POLICY
  value: {{ .Values.webhook.failurePolicy | quote }}
- name: WIW_SLIPPED_PODS_LEASE_NAMESPACE
  value: {{ .Release.Namespace | quote }}
{{- if .Values.nodeOptions }}
- name: NODE_OPTIONS
  value: {{ .Values.nodeOptions | quote }}
{{- end }}
{{- if .Values.clientAuth.caBundle }}
- name: WIW_CLIENT_CA_FILE
  value: /etc/workload-identity-webhook/client-ca/ca.crt
{{- end }}
{{- if .Values.azureStackEnvironment.configMap }}
- name: WIW_AZURE_ENVIRONMENT_FILEPATH
  value: /etc/workload-identity-webhook/azure/azurestackcloud.json
{{- end }}
{{- if .Values.awsPodIdentity.configMap }}
- name: WIW_AWS_CONTAINER_CREDENTIALS_CONFIG
  value: /etc/workload-identity-webhook/pod-identity/associations.json
{{- end }}
{{- if .Values.policy.configMap }}
- name: WIW_POLICY_FILE
  value: /etc/workload-identity-webhook/policy/policy.yaml
{{- end }}
{{- if ne .Values.injection.mode "webhook" }}
- name: WIW_POLICY_PARAMETERS
  value: "true"
- name: WIW_POLICY_PARAMETERS_LEASE_NAMESPACE
  value: {{ .Release.Namespace | quote }}
{{- end }}
{{- $c := .Values.certificates }}
{{- if eq $c.mode "selfManaged" }}
- name: WIW_CERT_SECRET
  value: {{ include "wiw.certSecretName" . | quote }}
- name: WIW_CERT_SECRET_NAMESPACE
  value: {{ .Release.Namespace | quote }}
- name: WIW_CERT_WEBHOOK_CONFIGURATION
  value: {{ include "wiw.fullname" . | quote }}
- name: WIW_SELF_SIGNED_HOSTS
  value: {{ include "wiw.servingHosts" . | quote }}
- name: WIW_CERT_VALIDITY_SECONDS
  value: {{ include "wiw.flagValue" $c.selfManaged.validitySeconds | quote }}
- name: WIW_CERT_RENEW_BEFORE_SECONDS
  value: {{ include "wiw.flagValue" $c.selfManaged.renewBeforeSeconds | quote }}
- name: WIW_CERT_PROPAGATION_SECONDS
  value: {{ include "wiw.flagValue" $c.selfManaged.propagationSeconds | quote }}
- name: WIW_CERT_RESYNC_SECONDS
  value: {{ include "wiw.flagValue" $c.selfManaged.resyncSeconds | quote }}
{{- else }}
- name: WIW_TLS_CERT_FILE
  value: /etc/workload-identity-webhook/tls/tls.crt
- name: WIW_TLS_KEY_FILE
  value: /etc/workload-identity-webhook/tls/tls.key
{{- end }}
{{- end }}

{{/* Tenant policy needs Namespace labels, from the CRD or from a file. */}}
{{- define "wiw.policyEnabled" -}}
{{- if or .Values.config.watchPolicies .Values.policy.configMap }}true{{ end }}
{{- end }}

{{/*
objectSelector and rules of a Pod entry: the opt-out labels, then the given match expressions
(the opt-in labels of webhook.scope labelled).
*/}}
{{- define "wiw.podEntry" -}}
objectSelector:
  matchExpressions:
    - key: workload-identity-webhook.io/skip
      operator: DoesNotExist
    - key: eks.amazonaws.com/skip-pod-identity-webhook
      operator: DoesNotExist
    {{- with . }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    operations: ["CREATE"]
    resources: ["pods"]
    scope: Namespaced
{{- end }}

{{/* PromQL label matchers that pick this release's series (prometheusRule.selector). */}}
{{- define "wiw.promSelector" -}}
{{- default (printf "namespace=%q" .Release.Namespace) .Values.prometheusRule.selector }}
{{- end }}

{{/* Where the alerts' runbook lives: prometheusRule.runbookUrl, or the docs of this version. */}}
{{- define "wiw.runbookUrl" -}}
{{- if .Values.prometheusRule.runbookUrl }}
{{- .Values.prometheusRule.runbookUrl }}
{{- else if .Chart.Sources }}
{{- printf "%s/blob/v%s/docs/observability.md" (first .Chart.Sources | trimSuffix "/") .Chart.AppVersion }}
{{- else }}
{{- fail "prometheusRule.runbookUrl is required: Chart.yaml names no source repository to link the runbook in" }}
{{- end }}
{{- end }}

{{/*
topologySpreadConstraints (dict "constraints" LIST "selector" LABELS): a constraint without a
labelSelector gets the Pods' own labels.
*/}}
{{- define "wiw.topologySpread" -}}
{{- with .constraints }}
topologySpreadConstraints:
  {{- range . }}
  - {{ toYaml (ternary . (merge (dict "labelSelector" (dict "matchLabels" ($.selector | fromYaml))) .) (hasKey . "labelSelector")) | nindent 4 | trim }}
  {{- end }}
{{- end }}
{{- end }}
