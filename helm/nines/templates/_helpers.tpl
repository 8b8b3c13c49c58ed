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
