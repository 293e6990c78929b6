{{/* Names and labels shared by every template. */}}

{{- define "trainium-dra.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "trainium-dra.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "trainium-dra.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "trainium-dra.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: call with (list $ "controller"). */}}
{{- define "trainium-dra.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "trainium-dra.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "trainium-dra.controllerName" -}}
{{- printf "%s-controller" (include "trainium-dra.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "trainium-dra.nodeName" -}}
{{- printf "%s-node" (include "trainium-dra.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "trainium-dra.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The node daemon's ServiceAccount as the apiserver names its requests. */}}
{{- define "trainium-dra.nodeUser" -}}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "trainium-dra.nodeName" .) -}}
{{- end -}}

{{/* The Secret holding the bearer token of the node daemons' simulator controls. */}}
{{- define "trainium-dra.simControlSecret" -}}
{{- default (printf "%s-sim-control" (include "trainium-dra.nodeName" .)) .Values.node.simControl.tokenSecret -}}
{{- end -}}

{{/*
CEL that shows a JSON value in an error message as the node daemon does
(driver/node/claimconfig.py `shown`): call with the CEL expression of the value.
*/}}
{{- define "trainium-dra.celShown" -}}
({{ . }} == null ? 'null' : type({{ . }}) == bool ? ({{ . }} ? 'true' : 'false') : type({{ . }}) == int ? string({{ . }}) : type({{ . }}) == string ? '"' + {{ . }}.replace('\\', '\\\\').replace('"', '\\"') + '"' : type({{ . }}) == double ? 'a float' : type({{ . }}) == list ? 'a list' : 'an object')
{{- end -}}

{{/*
The DRA driver name: driverName, or the profile's own (neuron.aws.com for aws).
*/}}
{{- define "trainium-dra.driverName" -}}
{{- .Values.driverName | default (ternary "neuron.aws.com" "trainium.sim.dev" (eq .Values.profile "aws")) -}}
{{- end }}

{{- define "trainium-dra.operatorName" -}}
{{- printf "%s-ultraserver-operator" (include "trainium-dra.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "trainium-dra.operatorNamespace" -}}
{{- .Values.ultraserverOperator.namespace | default .Release.Namespace -}}
{{- end -}}
