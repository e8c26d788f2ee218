{{/* Labels every object carries: the manifests' own plus Helm's standard ones. */}}
{{- define "hyperplace.labels" -}}
app.kubernetes.io/part-of: hyperplace
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* Labels of one component's objects: hyperplace.component takes (dict "ctx" $ "name" "hyperplace-scheduler"). */}}
{{- define "hyperplace.component" -}}
app.kubernetes.io/name: {{ .name }}
{{ include "hyperplace.labels" .ctx }}
{{- end -}}

{{- define "hyperplace.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* Pod placement: the component's own settings, else the chart-wide ones. */}}
{{- define "hyperplace.placement" -}}
{{- $ctx := .ctx -}}
{{- with (.c.nodeSelector | default $ctx.Values.nodeSelector) }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (.c.tolerations | default $ctx.Values.tolerations) }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (.c.affinity | default $ctx.Values.affinity) }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* A leader-elected component with more than one replica needs leader election. */}}
{{- define "hyperplace.checkReplicas" -}}
{{- if and (gt (int .c.replicas) 1) (not .c.leaderElection.enabled) -}}
{{- fail (printf "%s.replicas is %d but %s.leaderElection.enabled is false: two replicas would both act; enable leader election or use one replica" .name (int .c.replicas) .name) -}}
{{- end -}}
{{- end -}}

{{/* Container security, the same for the three components. */}}
{{- define "hyperplace.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}
