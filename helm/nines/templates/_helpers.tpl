{{/* Common names and labels. */}}
{{- define "nines.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "nines.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "nines.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "nines.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* env entries from existing Secrets: list of {name, secretName, key} */}}
{{- define "nines.secretEnv" -}}
{{- range . }}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ .secretName }}
      key: {{ .key }}
{{- end }}
{{- end -}}

{{/* The stream job's checkpoint and archive live on a volume mounted here (both modes). The job
reads its checkpoint's files through the local filesystem (late-data accounting), so they must be
local paths: in spark-operator mode a ReadWriteMany PVC shared by the driver and executors. */}}
{{- define "nines.streamDataPath" -}}/data{{- end -}}

{{/* PVC holding the stream job's checkpoint and archive.
dict: root (the chart context), name, accessMode, persistence ({size, storageClass}) */}}
{{- define "nines.streamPVC" -}}
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {{ .name }}
  labels:
    {{- include "nines.labels" .root | nindent 4 }}
    app.kubernetes.io/component: stream
spec:
  accessModes: [{{ .accessMode }}]
  {{- with .persistence.storageClass }}
  storageClassName: {{ . }}
  {{- end }}
  resources:
    requests:
      storage: {{ .persistence.size }}
{{- end -}}

{{/* Claim mounted at nines.streamDataPath by the SparkApplication's driver and executors. */}}
{{- define "nines.sparkClaimName" -}}
{{- .Values.stream.sparkOperator.persistence.existingClaim | default (printf "%s-stream-shared" (include "nines.fullname" .)) -}}
{{- end -}}

{{/* ServiceAccount of the pods that do not call the Kubernetes API (probes, local-mode stream,
Spark executors). */}}
{{- define "nines.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "nines.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{/* Where a TLS Secret is mounted (probes and the stream job). */}}
{{- define "nines.tlsPath" -}}/etc/nines/tls{{- end -}}

{{/* librdkafka settings of a Kafka client, as YAML: the user's `kafka` settings plus, with a
TLS Secret, security.protocol (SSL, or SASL_SSL with sasl.* settings) and the ssl.*.location
of the mounted files, unless `kafka` sets them itself.
dict: kafka (map), tls ({secretName, ca, cert, key} or empty), where (value path for errors) */}}
{{- define "nines.kafkaSettings" -}}
{{- $kafka := deepCopy (.kafka | default dict) -}}
{{- $tls := .tls | default dict -}}
{{- if $tls.secretName -}}
{{- $path := include "nines.tlsPath" . -}}
{{- $proto := get $kafka "security.protocol" | upper -}}
{{- $sasl := hasPrefix "SASL" $proto -}}
{{- range $k, $_ := $kafka }}{{ if hasPrefix "sasl." $k }}{{ $sasl = true }}{{ end }}{{ end -}}
{{- $want := ternary "SASL_SSL" "SSL" $sasl -}}
{{- if and $proto (ne $proto $want) -}}
{{- fail (printf "%s.kafka: security.protocol %s does not use TLS, but %s.tls.secretName is set (use %s)" .where $proto .where $want) -}}
{{- end -}}
{{- $_ := set $kafka "security.protocol" $want -}}
{{- if and $tls.ca (not (hasKey $kafka "ssl.ca.location")) -}}
{{- $_ := set $kafka "ssl.ca.location" (printf "%s/%s" $path $tls.ca) -}}
{{- end -}}
{{- if and $tls.cert (not $tls.key) -}}
{{- fail (printf "%s.tls: cert needs key (mutual TLS)" .where) -}}
{{- end -}}
{{- if and $tls.cert (not (hasKey $kafka "ssl.certificate.location")) -}}
{{- $_ := set $kafka "ssl.certificate.location" (printf "%s/%s" $path $tls.cert) -}}
{{- end -}}
{{- if and $tls.key (not (hasKey $kafka "ssl.key.location")) -}}
{{- $_ := set $kafka "ssl.key.location" (printf "%s/%s" $path $tls.key) -}}
{{- end -}}
{{- end -}}
{{- toYaml $kafka -}}
{{- end -}}

{{/* nodeSelector, tolerations and affinity of a pod (Deployment pod specs and SparkApplication
driver/executor specs take the same fields). */}}
{{- define "nines.scheduling" -}}
{{- with .Values.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Where webConfig's Secret is mounted (every /metrics server). */}}
{{- define "nines.webPath" -}}/etc/nines/web{{- end -}}

{{/* The readiness probe of a /metrics server: /-/ready renders nothing and needs no credentials,
so a big scrape or basic auth never takes the pod out of its Service. */}}
{{- define "nines.readiness" -}}
httpGet: {path: /-/ready, port: metrics, scheme: {{ .Values.webConfig.scheme }}}
{{- end -}}

{{/* The web_config_file line of a config file, with webConfig set. */}}
{{- define "nines.webConfigFile" -}}
{{- with .Values.webConfig.secretName }}
web_config_file: {{ printf "%s/%s" (include "nines.webPath" $) $.Values.webConfig.key | quote }}
{{- end }}
{{- end -}}

{{/* A bootstrap value: credentials only through secretEnv. A URL with user:password@ or token@
would land in a ConfigMap (readable by anyone who may read ConfigMaps); `env:VAR` names a
variable of `secretEnv` (only where the config resolves it: a probe's bootstrap; a Kafka
host:port list never needs credentials, they go in the `kafka` settings).
dict: value, secretEnv (list), where (value path for errors), kafkaOnly (bool) */}}
{{- define "nines.checkBootstrap" -}}
{{- if regexMatch "^([a-zA-Z][a-zA-Z0-9+.-]*://)?[^/?#]*@" .value -}}
{{- fail (printf "%s: credentials in a bootstrap URL would land in a ConfigMap; put the URL in a Secret and write %s: env:VAR with VAR in secretEnv" .where .where) -}}
{{- end -}}
{{- if and .kafkaOnly (hasPrefix "env:" .value) -}}
{{- fail (printf "%s: a Kafka host:port list, not an env: reference (Kafka credentials go in the kafka settings, with secretEnv)" .where) -}}
{{- end -}}
{{- if hasPrefix "env:" .value -}}
{{- $var := trimPrefix "env:" .value -}}
{{- $names := list -}}
{{- range .secretEnv }}{{ $names = append $names .name }}{{ end -}}
{{- if not (has $var $names) -}}
{{- fail (printf "%s: env:%s, but secretEnv sets no variable %s" .where $var $var) -}}
{{- end -}}
{{- end -}}
{{- end -}}
