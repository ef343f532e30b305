{{/* The image of every dnsconfigurer container: repository@digest, else repository:tag. */}}
{{- define "dnsconfigurer.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The cluster DNS server's namespace: kube-system in place of CoreDNS. */}}
{{- define "dnsconfigurer.dnsNamespace" -}}
{{- if eq .Values.placement "replace-coredns" }}kube-system{{ else }}dnsconfigurer{{ end -}}
{{- end -}}

{{/* The label CoreDNS's pods carry, on the cluster DNS in place of CoreDNS. */}}
{{- define "dnsconfigurer.dnsPlacementLabels" -}}
{{- if eq .Values.placement "replace-coredns" }}k8s-app: kube-dns{{ end -}}
{{- end -}}

{{/* The agents' --node-local-dns: the node-local stage, else none (the cluster DNS). */}}
{{- define "dnsconfigurer.nodeLocalDNSArg" -}}
{{- if .Values.nodeLocal.enabled }}
- --node-local-dns={{ .Values.nodeLocal.ip }},{{ .Values.cluster.dns }}
{{- end -}}
{{- end -}}

{{/* The shim's ShimConfiguration. */}}
{{- define "dnsconfigurer.shimConfig" -}}
{{- .Values.shim.config | default (.Files.Get "files/shim.yaml") -}}
{{- end -}}

{{/* The cluster DNS's ServerConfiguration: dns.config, else deploy/'s for the placement. */}}
{{- define "dnsconfigurer.dnsConfig" -}}
{{- if .Values.dns.config }}{{ .Values.dns.config }}
{{- else if eq .Values.placement "replace-coredns" }}{{ .Files.Get "files/dns-kubeadm.yaml" }}
{{- else }}{{ .Files.Get "files/dns.yaml" }}{{ end -}}
{{- end -}}

{{/* The canary nodeSelector of the node DaemonSets (deploy/components/canary). */}}
{{- define "dnsconfigurer.canarySelector" -}}
{{- if .Values.canary.enabled }}
{{ .Values.canary.label }}: "true"
{{- end -}}
{{- end -}}
