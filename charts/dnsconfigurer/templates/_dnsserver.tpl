{{/* The cluster DNS's Deployments: one, or one per topology zone (zones). */}}

{{/* The pod label that says which zones entry a cluster DNS pod belongs to. */}}
{{- define "dnsconfigurer.dnsZoneLabel" -}}
dnsconfigurer.io/topology-zone
{{- end -}}

{{/*
zones as a JSON list of {"zone", "suffix", "replicas"}: suffix names the
zone's objects (dnsconfigurer-dns-<suffix>), replicas is the entry's, else
replicaCount. Fails on two entries with one suffix.
*/}}
{{- define "dnsconfigurer.dnsZones" -}}
{{- $out := list -}}
{{- $seen := dict -}}
{{- range $z := .Values.zones | default list -}}
{{- $e := $z -}}
{{- if kindIs "string" $z }}{{ $e = dict "name" $z }}{{ end -}}
{{- $suffix := regexReplaceAll "[^a-z0-9-]" (lower $e.name) "-" | trimAll "-" -}}
{{- if hasKey $seen $suffix -}}
{{- fail (printf "zones: %q and %q both name objects dnsconfigurer-dns-%s; give each zone once" (get $seen $suffix) $e.name $suffix) -}}
{{- end -}}
{{- $_ := set $seen $suffix $e.name -}}
{{- $replicas := $e.replicas | default $.Values.replicaCount -}}
{{- $out = append $out (dict "zone" $e.name "suffix" $suffix "replicas" $replicas) -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/*
A cluster DNS Deployment: .root is the chart's context, .zone one entry of
dnsconfigurer.dnsZones or empty (the one Deployment of no zones).
*/}}
{{- define "dnsconfigurer.dnsDeployment" -}}
{{- $root := .root -}}
{{- $zone := .zone -}}
{{- $ns := include "dnsconfigurer.dnsNamespace" $root -}}
{{- $labels := include "dnsconfigurer.dnsLabels" $root | fromYaml -}}
{{- $selector := include "dnsconfigurer.dnsSelector" $root | fromYaml -}}
{{- $name := "dnsconfigurer-dns" -}}
{{- $nodeSelector := dict -}}
{{- if $zone -}}
{{- $name = printf "dnsconfigurer-dns-%s" $zone.suffix -}}
{{- $zl := dict (include "dnsconfigurer.dnsZoneLabel" $root) $zone.zone -}}
{{- $labels = merge $labels $zl -}}
{{- $selector = merge $selector $zl -}}
{{- $nodeSelector = dict "topology.kubernetes.io/zone" $zone.zone -}}
{{- end -}}
{{- with $root -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  {{- with include "dnsconfigurer.merge" (list .Values.deployment.annotations .Values.customAnnotations) }}
  annotations:
    {{- . | nindent 4 }}
  {{- end }}
  labels:
    {{- toYaml $labels | nindent 4 }}
  name: {{ $name }}
  namespace: {{ $ns }}
spec:
  {{- if and .Values.hpa.enabled .Values.autoscaler.enabled }}
  {{- fail "hpa.enabled and autoscaler.enabled: pick one; both would set the cluster DNS's replicas" }}
  {{- end }}
  {{- if $zone }}
  replicas: {{ $zone.replicas }}
  {{- else if not (or .Values.hpa.enabled .Values.autoscaler.enabled) }}
  replicas: {{ .Values.replicaCount }}
  {{- end }}
  selector:
    matchLabels:
      {{- toYaml $selector | nindent 6 }}
  strategy:
    {{- $ru := .Values.rollingUpdate }}
    {{- if and (has (toString $ru.maxSurge) (list "0" "0%")) (has (toString $ru.maxUnavailable) (list "0" "0%")) }}
    {{- fail "rollingUpdate: maxSurge and maxUnavailable cannot both be 0" }}
    {{- end }}
    rollingUpdate:
      maxSurge: {{ $ru.maxSurge | toJson }}
      maxUnavailable: {{ $ru.maxUnavailable | toJson }}
    type: RollingUpdate
  template:
    metadata:
      {{- with .Values.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      labels:
        {{- include "dnsconfigurer.merge" (list $selector (include "dnsconfigurer.dnsPlacementLabels" . | fromYaml) .Values.podLabels .Values.customLabels) | nindent 8 }}
    spec:
      # Preferred anti-affinity: values.yaml's affinity says why.
      {{- with .Values.affinity }}
      affinity:
        {{- tpl (toYaml .) $root | nindent 8 }}
      {{- end }}
      containers:
      - args:
        - serve
        # Argument 1: set from cluster-settings.yaml
        # (deploy/components/cluster-settings); keep its place.
        - --cluster-domain={{ .Values.cluster.domain }}
        # Everything else is in the ConfigMap dnsconfigurer-dns
        # (configmap.yaml), watched and reloaded. A flag given here
        # overrides the file: keep them out.
        - --config=/etc/dnsconfigurer/config.yaml
        env:
        # The Go runtime keeps the heap under the container's memory limit.
        - name: GOMEMLIMIT
          valueFrom:
            resourceFieldRef:
              resource: limits.memory
        {{- with .Values.env }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        # The image's entrypoint is the dnsconfigurer binary; the image is
        # set in deploy/kustomization.yaml (images:).
        image: {{ include "dnsconfigurer.image" . }}
        imagePullPolicy: {{ .Values.image.pullPolicy }}
        lifecycle:
          # Keep answering while the endpoint removal reaches every node
          # (the sleep action needs Kubernetes 1.30 or later).
          preStop:
            sleep:
              seconds: 5
        # /readyz turns ready after the first full sync of the informers
        # (before it the server answers SERVFAIL); /healthz answers while
        # the process serves.
        {{- if .Values.livenessProbe.enabled }}
        livenessProbe:
          {{- with include "dnsconfigurer.probeTiming" .Values.livenessProbe }}
          {{- . | nindent 10 }}
          {{- end }}
          httpGet:
            path: /healthz
            port: metrics
        {{- end }}
        name: dns
        ports:
        - containerPort: 53
          name: dns
          protocol: UDP
        - containerPort: 53
          name: dns-tcp
          protocol: TCP
        - containerPort: 9153
          name: metrics
          protocol: TCP
        {{- if .Values.readinessProbe.enabled }}
        readinessProbe:
          {{- with include "dnsconfigurer.probeTiming" .Values.readinessProbe }}
          {{- . | nindent 10 }}
          {{- end }}
          httpGet:
            path: /readyz
            port: metrics
        {{- end }}
        {{- with .Values.resources }}
        resources:
          {{- toYaml . | nindent 10 }}
        {{- end }}
        {{- with .Values.securityContext }}
        securityContext:
          {{- toYaml . | nindent 10 }}
        {{- end }}
        volumeMounts:
        - mountPath: /etc/dnsconfigurer
          name: config
          readOnly: true
        {{- with .Values.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with .Values.extraContainers }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
      {{- if and (eq .Values.deployment.dnsPolicy "None") (not .Values.deployment.dnsConfig) }}
      {{- fail "deployment.dnsConfig: needed with deployment.dnsPolicy None" }}
      {{- end }}
      {{- with .Values.deployment.dnsConfig }}
      dnsConfig:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      dnsPolicy: {{ .Values.deployment.dnsPolicy }}
      {{- with include "dnsconfigurer.imagePullSecrets" (dict "root" .) }}
      {{- . | nindent 6 }}
      {{- end }}
      {{- with .Values.initContainers }}
      initContainers:
      {{- toYaml . | nindent 6 }}
      {{- end }}
      {{- if $zone }}
      # The zone's nodes only: ANDed with affinity's own nodeAffinity.
      {{- end }}
      {{- with include "dnsconfigurer.merge" (list $nodeSelector .Values.nodeSelector) }}
      nodeSelector:
        {{- . | nindent 8 }}
      {{- end }}
      {{- with .Values.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      {{- with .Values.podSecurityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      serviceAccountName: {{ include "dnsconfigurer.dnsServiceAccount" . }}
      {{- if not (kindIs "invalid" .Values.terminationGracePeriodSeconds) }}
      terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
      {{- end }}
      {{- with .Values.tolerations }}
      tolerations:
      {{- toYaml . | nindent 6 }}
      {{- end }}
      # Spread over zones, then nodes: values.yaml's topologySpreadConstraints says why.
      {{- with .Values.topologySpreadConstraints }}
      topologySpreadConstraints:
      {{- tpl (toYaml .) $root | nindent 6 }}
      {{- end }}
      volumes:
      # A directory mount, not subPath: the kubelet swaps the file in on an
      # edit, and serve sees the change.
      - configMap:
          name: dnsconfigurer-dns
        name: config
      {{- with .Values.extraVolumes }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
{{- end -}}
{{- end -}}

{{/*
dns.files as ConfigMap data, its keys checked: each is a file in
/etc/dnsconfigurer of the cluster DNS and node-local pods, where `dnsconfigurer
convert --helm-values` points hosts.file. Nothing when there are none.
*/}}
{{- define "dnsconfigurer.dnsFiles" -}}
{{- range $k, $_ := .Values.dns.files -}}
{{- if not (regexMatch "^[-._a-zA-Z0-9]+$" $k) -}}
{{- fail (printf "dns.files.%s: not a ConfigMap key: use only letters, digits, '-', '_' and '.'" $k) -}}
{{- else if gt (len $k) 253 -}}
{{- fail (printf "dns.files.%s: not a ConfigMap key: longer than 253 characters" $k) -}}
{{- else if or (eq $k ".") (hasPrefix ".." $k) -}}
{{- fail (printf "dns.files.%s: not a ConfigMap key: must not be '.' or start with '..'" $k) -}}
{{- else if eq $k "config.yaml" -}}
{{- fail "dns.files.config.yaml: config.yaml is the ServerConfiguration's own key (dns.config); name the file otherwise and point hosts.file at /etc/dnsconfigurer/NAME" -}}
{{- else if eq $k "cluster" -}}
{{- fail "dns.files.cluster: node-local reads the cluster DNS's configuration from /etc/dnsconfigurer/cluster; name the file otherwise and point hosts.file at /etc/dnsconfigurer/NAME" -}}
{{- end -}}
{{- end -}}
{{- with .Values.dns.files }}{{ toYaml . }}{{ end -}}
{{- end -}}
