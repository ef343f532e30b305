{{/* Helpers of the pod and metadata values (README.md, "Values against coredns/helm"). */}}

{{/*
One map, as YAML, from a list of maps: the first that has a key wins, so the
chart's own labels come first and a value cannot change them. Nothing when
every map is empty.
*/}}
{{- define "dnsconfigurer.merge" -}}
{{- $out := dict -}}
{{- range . }}{{ $out = merge $out (. | default dict) }}{{ end -}}
{{- if $out }}{{ toYaml $out }}{{ end -}}
{{- end -}}

{{/* The metadata labels of the cluster DNS's objects, with customLabels. */}}
{{- define "dnsconfigurer.dnsLabels" -}}
{{- $own := dict "app.kubernetes.io/name" "dnsconfigurer-dns" "app.kubernetes.io/part-of" "dnsconfigurer" -}}
{{- include "dnsconfigurer.merge" (list $own (include "dnsconfigurer.dnsPlacementLabels" . | fromYaml) .Values.customLabels) -}}
{{- end -}}

{{/* The labels of the cluster DNS's pods, as its selector has them. */}}
{{- define "dnsconfigurer.dnsSelector" -}}
app.kubernetes.io/component: dns
app.kubernetes.io/instance: dnsconfigurer-dns
{{- end -}}

{{/* The cluster DNS's ServiceAccount: serviceAccount.name, else the chart's (create) or the namespace's default. */}}
{{- define "dnsconfigurer.dnsServiceAccount" -}}
{{- if .Values.serviceAccount.create -}}
{{ .Values.serviceAccount.name | default "dnsconfigurer-dns" }}
{{- else -}}
{{ .Values.serviceAccount.name | default "default" }}
{{- end -}}
{{- end -}}

{{/* A pod's imagePullSecrets: image.pullSecrets, then the list given (the autoscaler's own). */}}
{{- define "dnsconfigurer.imagePullSecrets" -}}
{{- with concat (.root.Values.image.pullSecrets | default list) (.extra | default list) | uniq -}}
imagePullSecrets:
{{ toYaml . }}
{{- end -}}
{{- end -}}

{{/*
A probe's timing fields (livenessProbe, readinessProbe) that are set; an
unset one (null) is left to the API's default.
*/}}
{{- define "dnsconfigurer.probeTiming" -}}
{{- $set := dict -}}
{{- range $k, $v := omit . "enabled" }}{{ if not (kindIs "invalid" $v) }}{{ $_ := set $set $k $v }}{{ end }}{{ end -}}
{{- if $set }}{{ toYaml $set }}{{ end -}}
{{- end -}}

{{/*
A PodDisruptionBudget's spec from a podDisruptionBudget value (minAvailable
or maxUnavailable, unhealthyPodEvictionPolicy, selector) and the pods'
labels (.selector, a map), the selector when the value has none.
*/}}
{{- define "dnsconfigurer.pdbSpec" -}}
{{- $spec := dict -}}
{{- range $k, $v := .pdb }}{{ if not (kindIs "invalid" $v) }}{{ $_ := set $spec $k $v }}{{ end }}{{ end -}}
{{- if and (hasKey $spec "minAvailable") (hasKey $spec "maxUnavailable") -}}
{{- fail (printf "%s: minAvailable and maxUnavailable are exclusive; set %s.minAvailable=null to use maxUnavailable" .name .name) -}}
{{- end -}}
{{- if not $spec.selector -}}
{{- $_ := set $spec "selector" (dict "matchLabels" .selector) -}}
{{- end -}}
{{- toYaml $spec -}}
{{- end -}}

{{/*
The scheduling fields of a node agent's, the node-local stage's or the
webhook's pods from its values (.values): affinity, imagePullSecrets,
nodeSelector (after the canary's label where .canary), priorityClassName and
tolerations.
*/}}
{{- define "dnsconfigurer.podScheduling" -}}
{{- $v := .values -}}
{{- with $v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with include "dnsconfigurer.imagePullSecrets" (dict "root" .root) }}
{{ . }}
{{- end }}
{{- $canary := dict -}}
{{- if .canary }}{{ $canary = include "dnsconfigurer.canarySelector" .root | fromYaml }}{{ end -}}
{{- with include "dnsconfigurer.merge" (list $canary $v.nodeSelector) }}
nodeSelector:
  {{- . | nindent 2 }}
{{- end }}
{{- with $v.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
{{ toYaml . }}
{{- end }}
{{- end -}}
