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
- --node-local-dns={{ .Values.nodeLocal.ip }},{{ include "dnsconfigurer.clusterDNS" . }}
{{- end -}}
{{- end -}}

{{/* The shim's ShimConfiguration. */}}
{{- define "dnsconfigurer.shimConfig" -}}
{{- .Values.shim.config | default (.Files.Get "files/shim.yaml") -}}
{{- end -}}

{{/*
The cluster DNS's ServerConfiguration: dns.config (a YAML string as given,
or a map as YAML; preflight.yaml checks it), else deploy/'s for the
placement.
*/}}
{{- define "dnsconfigurer.dnsConfig" -}}
{{- if .Values.dns.config }}
{{- if kindIs "string" .Values.dns.config }}{{ .Values.dns.config }}{{ else }}{{ toYaml .Values.dns.config }}{{ end }}
{{- else if eq .Values.placement "replace-coredns" }}{{ .Files.Get "files/dns-kubeadm.yaml" }}
{{- else }}{{ .Files.Get "files/dns.yaml" }}{{ end -}}
{{- end -}}

{{/* The canary nodeSelector of the node DaemonSets (deploy/components/canary). */}}
{{- define "dnsconfigurer.canarySelector" -}}
{{- if .Values.canary.enabled }}
{{ .Values.canary.label }}: "true"
{{- end -}}
{{- end -}}

{{/*
The webhook's serving certificate when cert-manager is off, as JSON with
base64 "ca", "crt" and "key": webhook.caBundle and webhook.tls when given
(all three), else the one this release made before (Secret
dnsconfigurer-webhook-tls keeps its CA as ca.crt), else a new CA and
certificate for dnsconfigurer-webhook.dnsconfigurer.svc (10 years). Include
it once per file: each call of a new one makes another.
*/}}
{{- define "dnsconfigurer.webhookTLS" -}}
{{- $w := .Values.webhook -}}
{{- if or $w.caBundle $w.tls.cert $w.tls.key -}}
{{- if not (and $w.caBundle $w.tls.cert $w.tls.key) -}}
{{- fail "webhook.caBundle, webhook.tls.cert and webhook.tls.key: give all three, or none (the chart then makes a CA and certificate)" -}}
{{- end -}}
{{- dict "ca" $w.caBundle "crt" ($w.tls.cert | b64enc) "key" ($w.tls.key | b64enc) | toJson -}}
{{- else -}}
{{- $s := lookup "v1" "Secret" "dnsconfigurer" "dnsconfigurer-webhook-tls" -}}
{{- if and $s $s.data (index $s.data "ca.crt") -}}
{{- dict "ca" (index $s.data "ca.crt") "crt" (index $s.data "tls.crt") "key" (index $s.data "tls.key") | toJson -}}
{{- else -}}
{{- $ca := genCA "dnsconfigurer-webhook-ca" 3650 -}}
{{- $cn := "dnsconfigurer-webhook.dnsconfigurer.svc" -}}
{{- $cert := genSignedCert $cn nil (list $cn "dnsconfigurer-webhook.dnsconfigurer.svc.cluster.local" "dnsconfigurer-webhook.dnsconfigurer" "dnsconfigurer-webhook") 3650 $ca -}}
{{- dict "ca" ($ca.Cert | b64enc) "crt" ($cert.Cert | b64enc) "key" ($cert.Key | b64enc) | toJson -}}
{{- end -}}
{{- end -}}
{{- end -}}
