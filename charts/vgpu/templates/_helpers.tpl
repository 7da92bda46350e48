{{/* Names, labels and the pieces several templates share. */}}

{{- define "vgpu.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "vgpu.fullname" -}}
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

{{- define "vgpu.scheduler.fullname" -}}
{{- printf "%s-scheduler" (include "vgpu.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "vgpu.devicePlugin.fullname" -}}
{{- printf "%s-device-plugin" (include "vgpu.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "vgpu.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "vgpu.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.global.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* metadata.annotations from global.annotations (nothing when there are none). */}}
{{- define "vgpu.annotations" -}}
{{- with .Values.global.annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component ("scheduler" or "device-plugin"): pass (list . "x"). */}}
{{- define "vgpu.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "vgpu.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "vgpu.image" -}}
{{- $root := index . 0 -}}
{{- $image := index . 1 -}}
{{- $repository := $image.repository -}}
{{- $first := regexReplaceAll "/.*" $repository "" -}}
{{- $hasRegistry := and (contains "/" $repository) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) -}}
{{- if and $root.Values.global.imageRegistry (not $hasRegistry) -}}
{{- $repository = printf "%s/%s" $root.Values.global.imageRegistry $repository -}}
{{- end -}}
{{- printf "%s:%s" $repository (default $root.Chart.AppVersion $image.tag) -}}
{{- end -}}

{{/* The kube-scheduler image tag: the value, else the cluster's vX.Y.Z. */}}
{{- define "vgpu.kubeSchedulerTag" -}}
{{- default (regexFind "^v[0-9]+\\.[0-9]+\\.[0-9]+" .Capabilities.KubeVersion.Version) .Values.scheduler.kubeScheduler.image.tag -}}
{{- end -}}

{{- define "vgpu.kubeSchedulerConfigApiVersion" -}}
{{- if .Values.scheduler.kubeScheduler.configApiVersion -}}
{{- .Values.scheduler.kubeScheduler.configApiVersion -}}
{{- else if semverCompare ">=1.25-0" .Capabilities.KubeVersion.Version -}}
kubescheduler.config.k8s.io/v1
{{- else -}}
kubescheduler.config.k8s.io/v1beta3
{{- end -}}
{{- end -}}

{{/*
The device config: files/device-config.yaml with the values laid over it. A key of
devices.<backend> replaces the file's key of backends.<backend>; a map (resources,
options) is merged key by key. Keys are set one by one ("set"), never with
mergeOverwrite, which would skip false and 0. tests/unit/chart/chart_test.py does the
same merge to check the result with vgpu's own parser.
*/}}
{{- define "vgpu.deviceConfig" -}}
{{- if .Values.deviceConfig.override -}}
{{ .Values.deviceConfig.override }}
{{- else -}}
{{- $config := .Files.Get "files/device-config.yaml" | fromYaml -}}
{{- $scheduler := get $config "scheduler" | default dict -}}
{{- $_ := set $scheduler "nodePolicy" .Values.scheduler.defaultSchedulerPolicy.nodeSchedulerPolicy -}}
{{- $_ := set $scheduler "devicePolicy" .Values.scheduler.defaultSchedulerPolicy.gpuSchedulerPolicy -}}
{{- $_ := set $scheduler "heartbeatTimeout" .Values.scheduler.heartbeatTimeout -}}
{{- $_ := set $config "scheduler" $scheduler -}}
{{- $backends := get $config "backends" | default dict -}}
{{- range $name, $device := .Values.devices -}}
{{- $section := get $backends $name | default dict -}}
{{- range $key, $value := $device -}}
{{- if kindIs "map" $value -}}
{{- $sub := get $section $key | default dict -}}
{{- range $k, $v := $value -}}
{{- $_ := set $sub $k $v -}}
{{- end -}}
{{- $_ := set $section $key $sub -}}
{{- else if not (kindIs "invalid" $value) -}}
{{- $_ := set $section $key $value -}}
{{- end -}}
{{- end -}}
{{- $_ := set $backends $name $section -}}
{{- end -}}
{{- $_ := set $config "backends" $backends -}}
{{- with .Values.deviceConfig.nodes -}}
{{- $_ := set $config "nodes" . -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}
{{- end -}}

{{/*
The kube-scheduler extender's managedResources: every resource of every enabled backend.
The device count (resources.count) is advertised by the node agent, so the
kube-scheduler checks it against the node as usual; memory, cores and the rest exist
only in vgpu-scheduler's accounting (ignoredByScheduler).
*/}}
{{- define "vgpu.managedResources" -}}
{{- range $name, $device := .Values.devices }}
{{- if $device.enabled }}
{{- range $role, $resource := $device.resources }}
{{- if $resource }}
- name: {{ $resource | quote }}
  ignoredByScheduler: {{ ne $role "count" }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The CEL condition of the webhook: the pod names a managed resource in its limits. */}}
{{- define "vgpu.webhookMatchExpression" -}}
{{- $names := list -}}
{{- range $name, $device := .Values.devices -}}
{{- if $device.enabled -}}
{{- range $role, $resource := $device.resources -}}
{{- if $resource -}}
{{- $names = append $names (printf "'%s'" $resource) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $list := printf "[%s]" (join ", " $names) -}}
{{- $test := printf "has(c.resources) && has(c.resources.limits) && c.resources.limits.exists(r, r in %s)" $list -}}
{{- printf "object.spec.containers.exists(c, %s) || (has(object.spec.initContainers) && object.spec.initContainers.exists(c, %s))" $test $test -}}
{{- end -}}

{{/*
The users that may write vgpu's reserved pod annotations: the chart's two service accounts
(vgpu-scheduler binds, the node agent confirms) and scheduler.admissionWebhook.trustedUsers.
Comma-separated, as --trusted-users takes them.
*/}}
{{- define "vgpu.trustedUsers" -}}
{{- $users := list (printf "system:serviceaccount:%s:%s" .Release.Namespace (include "vgpu.scheduler.fullname" .)) (printf "system:serviceaccount:%s:%s" .Release.Namespace (include "vgpu.devicePlugin.fullname" .)) -}}
{{- join "," (concat $users .Values.scheduler.admissionWebhook.trustedUsers) -}}
{{- end -}}

{{/*
CEL for the security webhook: our own pods (the chart's service accounts in the release
namespace) never wait for it, so vgpu-scheduler can always be recreated.
*/}}
{{- define "vgpu.securityNotOurPods" -}}
{{- printf "!(request.namespace == '%s' && has(object.spec.serviceAccountName) && object.spec.serviceAccountName in ['%s', '%s'])" .Release.Namespace (include "vgpu.scheduler.fullname" .) (include "vgpu.devicePlugin.fullname" .) -}}
{{- end -}}

{{/*
CEL for the security webhook: what it must see. A field absent from the request is an error
in CEL, not an empty value (seen on kube-apiserver 1.37: "no such key: subResource"), and an
error counts as a failed call: every optional field is guarded with has(). Every CREATE (a container's environment),
ephemeral containers as they are added, and updates by anyone but the trusted users that
change a reserved annotation (keys::kReservedPodAnnotations); the webhook checks all of it
again itself.
*/}}
{{- define "vgpu.securityMayEscape" -}}
{{- $users := list -}}
{{- range (splitList "," (include "vgpu.trustedUsers" .)) -}}
{{- $users = append $users (printf "'%s'" .) -}}
{{- end -}}
{{- $keys := "['vgpu.io/assignment', 'vgpu.io/bind-phase', 'vgpu.io/bind-time', 'vgpu.io/allocate-error', 'vgpu.io/capacity-freed']" -}}
{{- $now := "(has(object.metadata.annotations) && k in object.metadata.annotations ? object.metadata.annotations[k] : '')" -}}
{{- $before := "(has(oldObject.metadata.annotations) && k in oldObject.metadata.annotations ? oldObject.metadata.annotations[k] : '')" -}}
{{- printf "request.operation == 'CREATE' || (has(request.subResource) && request.subResource == 'ephemeralcontainers') || (!(request.userInfo.username in [%s]) && %s.exists(k, %s != %s))" (join ", " $users) $keys $now $before -}}
{{- end -}}
