{{- /*
The two Service addresses the chart needs: the cluster DNS's (cluster.dns)
and its upstream Service's (cluster.dnsUpstream). A value that is set wins.
An empty one is picked inside the cluster's Service range:

- the range is the first CIDR of ServiceCIDR "kubernetes"
  (networking.k8s.io/v1), else the /24 that starts just below Service
  default/kubernetes (the API server gives it the range's first address),
  else, with no cluster to read (helm template), kubeadm's 10.96.0.0/12;
- the address is this release's Service's when it exists (an upgrade
  keeps it), else the first free one of the range's addresses 53 to 99
  (10.43.0.53 on k3s; kube-dns holds the tenth), low in the range, where
  the API server allocates last (KEP-3070);
- with placement replace-coredns, cluster.dns is kube-system/kube-dns's
  address, else the range's tenth.

preflight.yaml refuses a set address outside the range and an address
another Service holds. NOTES.txt and comments in the Services say which
addresses were taken and why.
*/ -}}

{{/* The cluster DNS Service's address. */}}
{{- define "dnsconfigurer.clusterDNS" -}}
{{- (include "dnsconfigurer.addresses" . | fromJson).dns -}}
{{- end -}}

{{/* The upstream Service's address. */}}
{{- define "dnsconfigurer.clusterDNSUpstream" -}}
{{- (include "dnsconfigurer.addresses" . | fromJson).upstream -}}
{{- end -}}

{{/*
The addresses as JSON: dns, upstream, their reasons (dnsWhy, upstreamWhy),
the Service of another release holding each (dnsHeldBy, upstreamHeldBy),
the range (a serviceRange), and full, the value no free address was left
for. The Services are listed once, here. Worked out once per render: the result
is kept in .Values.__addresses, since lookup asks the API server each time.
*/}}
{{- define "dnsconfigurer.addresses" -}}
{{- if not (hasKey .Values "__addresses") -}}
{{- $_ := set .Values "__addresses" (include "dnsconfigurer.pickAddresses" . | fromJson) -}}
{{- end -}}
{{- index .Values "__addresses" | toJson -}}
{{- end -}}

{{- define "dnsconfigurer.pickAddresses" -}}
{{- $r := include "dnsconfigurer.serviceRange" . | fromJson -}}
{{- $ns := include "dnsconfigurer.dnsNamespace" . -}}
{{- $ownDNS := printf "%s/dnsconfigurer-dns" $ns -}}
{{- $ownUp := printf "%s/dnsconfigurer-dns-upstream" $ns -}}
{{- $ours := list $ownDNS $ownUp -}}
{{- if eq .Values.placement "replace-coredns" -}}
{{- $ownDNS = "kube-system/kube-dns" -}}
{{- $ours = append $ours $ownDNS -}}
{{- end -}}
{{- /* $own: our Services' addresses by name; $holder: the other Services' names by address. */ -}}
{{- $own := dict -}}
{{- $holder := dict -}}
{{- $services := lookup "v1" "Service" "" "" -}}
{{- range $svc := ($services.items | default list) -}}
{{- $key := printf "%s/%s" $svc.metadata.namespace $svc.metadata.name -}}
{{- $ips := $svc.spec.clusterIPs | default (list $svc.spec.clusterIP) -}}
{{- if has $key $ours -}}
{{- $_ := set $own $key (first $ips) -}}
{{- else -}}
{{- range $ip := $ips }}{{ $_ := set $holder $ip $key }}{{ end -}}
{{- end -}}
{{- end -}}
{{- $taken := keys $holder -}}
{{- $out := dict "range" $r -}}
{{- /* cluster.dns */ -}}
{{- if .Values.cluster.dns -}}
{{- $_ := set $out "dns" .Values.cluster.dns -}}
{{- $_ := set $out "dnsWhy" "cluster.dns" -}}
{{- else if hasKey $own $ownDNS -}}
{{- $_ := set $out "dns" (get $own $ownDNS) -}}
{{- $_ := set $out "dnsWhy" (printf "the address Service %s has" $ownDNS) -}}
{{- else if eq .Values.placement "replace-coredns" -}}
{{- $_ := set $out "dns" (include "dnsconfigurer.rangeAddr" (dict "r" $r "n" 10)) -}}
{{- $_ := set $out "dnsWhy" (printf "the tenth address of the Service range %s, kubelet's usual clusterDNS, as no Service kube-system/kube-dns was read (the range %s)" $r.cidr $r.from) -}}
{{- else -}}
{{- $ip := include "dnsconfigurer.freeAddr" (dict "r" $r "taken" $taken) -}}
{{- $_ := set $out "dns" $ip -}}
{{- $_ := set $out "dnsWhy" (printf "the first free address from the 53rd of the Service range %s (%s)" $r.cidr $r.from) -}}
{{- if not $ip }}{{ $_ := set $out "full" "cluster.dns" }}{{ end -}}
{{- end -}}
{{- /* cluster.dnsUpstream */ -}}
{{- if .Values.cluster.dnsUpstream -}}
{{- $_ := set $out "upstream" .Values.cluster.dnsUpstream -}}
{{- $_ := set $out "upstreamWhy" "cluster.dnsUpstream" -}}
{{- else if hasKey $own $ownUp -}}
{{- $_ := set $out "upstream" (get $own $ownUp) -}}
{{- $_ := set $out "upstreamWhy" (printf "the address Service %s has" $ownUp) -}}
{{- else -}}
{{- $ip := include "dnsconfigurer.freeAddr" (dict "r" $r "taken" (append $taken $out.dns)) -}}
{{- $_ := set $out "upstream" $ip -}}
{{- $_ := set $out "upstreamWhy" (printf "the first free address from the 53rd of the Service range %s but %s (%s)" $r.cidr $out.dns $r.from) -}}
{{- if and (not $ip) (not $out.full) }}{{ $_ := set $out "full" "cluster.dnsUpstream" }}{{ end -}}
{{- end -}}
{{- $_ := set $out "dnsHeldBy" (get $holder $out.dns) -}}
{{- $_ := set $out "upstreamHeldBy" (get $holder $out.upstream) -}}
{{- $out | toJson -}}
{{- end -}}

{{/*
The Service range as JSON: cidr (the network address and prefix length),
from (where it was read), checked (the prefix is the cluster's, not a
guess), v6, and for IPv4 base, the network address as a number.
*/}}
{{- define "dnsconfigurer.serviceRange" -}}
{{- $cidr := "" -}}
{{- $from := "" -}}
{{- $checked := false -}}
{{- $sc := lookup "networking.k8s.io/v1" "ServiceCIDR" "" "kubernetes" -}}
{{- if and $sc $sc.spec $sc.spec.cidrs -}}
{{- $cidr = first $sc.spec.cidrs -}}
{{- $from = "read from ServiceCIDR kubernetes" -}}
{{- $checked = true -}}
{{- else -}}
{{- $k := lookup "v1" "Service" "default" "kubernetes" -}}
{{- if and $k $k.spec $k.spec.clusterIP -}}
{{- $ip := $k.spec.clusterIP -}}
{{- if contains ":" $ip -}}
{{- $cidr = printf "%s/112" (trimSuffix "1" $ip) -}}
{{- else -}}
{{- $cidr = printf "%s/24" (include "dnsconfigurer.ip4" (sub (include "dnsconfigurer.ip4Int" $ip | atoi) 1)) -}}
{{- end -}}
{{- $from = printf "read from Service default/kubernetes at %s, its first address (no ServiceCIDR was read: the range's size is a guess)" $ip -}}
{{- else -}}
{{- $cidr = "10.96.0.0/12" -}}
{{- $from = "assumed: kubeadm's default, as no cluster was read (helm template); set cluster.dns and cluster.dnsUpstream for another range" -}}
{{- end -}}
{{- end -}}
{{- $addr := first (splitList "/" $cidr) -}}
{{- $bits := last (splitList "/" $cidr) | atoi -}}
{{- if contains ":" $addr -}}
{{- dict "cidr" $cidr "from" $from "checked" $checked "v6" true "addr" $addr "bits" $bits | toJson -}}
{{- else -}}
{{- $size := 1 -}}
{{- range until (sub 32 $bits | int) }}{{ $size = mul $size 2 }}{{ end -}}
{{- $base := mul (div (include "dnsconfigurer.ip4Int" $addr | atoi) $size) $size -}}
{{- dict "cidr" $cidr "from" $from "checked" $checked "v6" false "base" $base "size" $size | toJson -}}
{{- end -}}
{{- end -}}

{{/* An IPv4 address as a number. */}}
{{- define "dnsconfigurer.ip4Int" -}}
{{- $o := splitList "." . -}}
{{- add (mul (index $o 0 | atoi) 16777216) (mul (index $o 1 | atoi) 65536) (mul (index $o 2 | atoi) 256) (index $o 3 | atoi) -}}
{{- end -}}

{{/* A number as an IPv4 address. */}}
{{- define "dnsconfigurer.ip4" -}}
{{- printf "%d.%d.%d.%d" (mod (div . 16777216) 256) (mod (div . 65536) 256) (mod (div . 256) 256) (mod . 256) -}}
{{- end -}}

{{/*
The range's address number .n (.r a serviceRange), or nothing when the
range is smaller. IPv6: the network address must end in "::" (it does
for a prefix of /112 and for Kubernetes' usual ranges).
*/}}
{{- define "dnsconfigurer.rangeAddr" -}}
{{- if .r.v6 -}}
{{- if hasSuffix "::" .r.addr }}{{ printf "%s%x" .r.addr .n }}{{ end -}}
{{- else if lt (int .n) (int .r.size) -}}
{{- include "dnsconfigurer.ip4" (add (int64 .r.base) .n) -}}
{{- end -}}
{{- end -}}

{{/* The first of the range's addresses 53 to 99 not in .taken, or nothing. */}}
{{- define "dnsconfigurer.freeAddr" -}}
{{- $found := "" -}}
{{- range $n := untilStep 53 100 1 -}}
{{- if not $found -}}
{{- $ip := include "dnsconfigurer.rangeAddr" (dict "r" $.r "n" $n) -}}
{{- if and $ip (not (has $ip $.taken)) }}{{ $found = $ip }}{{ end -}}
{{- end -}}
{{- end -}}
{{- $found -}}
{{- end -}}

{{/*
Whether address .ip is inside the range .r: "true" or "false"; "true" for
an IPv6 address in an IPv6 range (the API server checks those).
*/}}
{{- define "dnsconfigurer.inRange" -}}
{{- if .r.v6 -}}
{{- contains ":" .ip -}}
{{- else if contains ":" .ip -}}
false
{{- else -}}
{{- eq (div (include "dnsconfigurer.ip4Int" .ip | atoi) (int64 .r.size)) (div (int64 .r.base) (int64 .r.size)) -}}
{{- end -}}
{{- end -}}
