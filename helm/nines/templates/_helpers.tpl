{{/* Common names and labels. */}}
{{- define "nines.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{/* A probe's Deployment and ConfigMap name; checks.yaml refuses two probes whose names agree
once cut to Kubernetes' 63 characters. Context: dict "root" $ "cluster" $p.cluster. */}}
{{- define "nines.probeName" -}}
{{- printf "%s-probe-%s" (include "nines.fullname" .root) .cluster | trunc 63 | trimSuffix "-" -}}
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
TLS Secret, security.protocol (SSL, or SASL_SSL with sasl.* settings or an aws-msk-iam login)
and the ssl.*.location of the mounted files, unless `kafka` sets them itself.
dict: kafka (map), tls ({secretName, ca, cert, key} or empty), login (kafkaLogin), where (value
path for errors) */}}
{{- define "nines.kafkaSettings" -}}
{{- $kafka := deepCopy (.kafka | default dict) -}}
{{- $tls := .tls | default dict -}}
{{- if $tls.secretName -}}
{{- $path := include "nines.tlsPath" . -}}
{{- $proto := get $kafka "security.protocol" | upper -}}
{{- $sasl := hasPrefix "SASL" $proto -}}
{{- range $k, $_ := $kafka }}{{ if hasPrefix "sasl." $k }}{{ $sasl = true }}{{ end }}{{ end -}}
{{- if has (.login | default "") (list "aws-msk-iam" "oidc") }}{{ $sasl = true }}{{ end -}}
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

{{/* Bytes in a Kubernetes quantity (an integer with an optional Ki/Mi/Gi/Ti/K/M/G/T suffix).
dict: quantity, where (the values key, for the error) */}}
{{- define "nines.quantityBytes" -}}
{{- $q := toString .quantity -}}
{{- $units := dict "" 1 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "K" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 -}}
{{- $num := regexFind "^[0-9]+" $q -}}
{{- $suffix := trimPrefix $num $q -}}
{{- if or (not $num) (not (hasKey $units $suffix)) -}}
{{- fail (printf "%s: %q is not a size the chart can compute with (use e.g. 40Gi)" .where $q) -}}
{{- end -}}
{{- mul (int64 $num) (int64 (get $units $suffix)) -}}
{{- end -}}

{{/* The stream's archive_max_size in bytes: archiveMaxSize, or archiveVolumePercent of the
chart-created volume (the archive shares it with the checkpoint, so it must never fill it). */}}
{{- define "nines.archiveMaxSize" -}}
{{- $s := .Values.stream -}}
{{- if $s.archiveMaxSize -}}
{{- include "nines.quantityBytes" (dict "quantity" $s.archiveMaxSize "where" "stream.archiveMaxSize") -}}
{{- else if and (eq $s.mode "spark-operator") $s.sparkOperator.persistence.existingClaim -}}
{{- fail "stream.archiveMaxSize: required with sparkOperator.persistence.existingClaim (the chart does not know that volume's size; e.g. 80% of it)" -}}
{{- else -}}
{{- $size := ternary $s.persistence.size $s.sparkOperator.persistence.size (eq $s.mode "local") -}}
{{- $where := ternary "stream.persistence.size" "stream.sparkOperator.persistence.size" (eq $s.mode "local") -}}
{{- $bytes := include "nines.quantityBytes" (dict "quantity" $size "where" $where) | int64 -}}
{{- div (mul $bytes (int64 $s.archiveVolumePercent)) 100 -}}
{{- end -}}
{{- end -}}
