{{/*
dnsconfigurer.configCheck fails the render when dns.config is a
ServerConfiguration that serve refuses field by field, naming the field:
"dns.config.cache.maxTTL: ...". dns.config is a YAML string or a map.
The rules are files/serverconfiguration.schema.json, generated from
api/v1alpha1 (go generate ./api/v1alpha1): the fields, their types, and
each field's own rules. Rules between fields stay serve's (README.md,
dns.config).
*/}}
{{- define "dnsconfigurer.configCheck" -}}
{{- $cfg := .Values.dns.config -}}
{{- if kindIs "string" $cfg -}}
{{- $cfg = fromYaml $cfg -}}
{{- if and (hasKey $cfg "Error") (eq (len $cfg) 1) -}}
{{- fail (printf "dns.config: not a YAML mapping (a ServerConfiguration with apiVersion and kind): %s" (get $cfg "Error")) -}}
{{- end -}}
{{- end -}}
{{- $schema := .Files.Get "files/serverconfiguration.schema.json" | fromJson -}}
{{- include "dnsconfigurer.configCheckNode" (dict "v" $cfg "s" $schema "p" "dns.config") -}}
{{- end -}}

{{/* One node: .v the value (null is unset, as serve reads it), .s its schema, .p its path. */}}
{{- define "dnsconfigurer.configCheckNode" -}}
{{- $v := .v -}}
{{- $s := .s -}}
{{- $p := .p -}}
{{- if not (kindIs "invalid" $v) -}}
{{- $types := $s.type -}}
{{- if kindIs "string" $types -}}{{- $types = list $types -}}{{- end -}}
{{- $t := "" -}}
{{- if kindIs "map" $v -}}{{- $t = "object" -}}
{{- else if kindIs "slice" $v -}}{{- $t = "array" -}}
{{- else if kindIs "string" $v -}}{{- $t = "string" -}}
{{- else if kindIs "bool" $v -}}{{- $t = "boolean" -}}
{{- else if or (kindIs "float64" $v) (kindIs "int" $v) (kindIs "int64" $v) -}}
{{- $t = "number" -}}
{{- if eq (float64 $v) (floor $v) -}}{{- $t = "integer" -}}{{- end -}}
{{- end -}}
{{- if not (has $t $types) -}}
{{- $shown := $t -}}
{{- if has $t (list "string" "number" "integer" "boolean") -}}{{- $shown = printf "%s %s" $t (toJson $v) -}}{{- end -}}
{{- fail (printf "%s: a %s, want %s" $p $shown (join " or " $types)) -}}
{{- end -}}
{{- if eq $t "object" -}}
{{- range $k, $x := $v -}}
{{- if not (hasKey $s.properties $k) -}}
{{- fail (printf "%s.%s: unknown field (serve decodes strictly); the fields here: %s" $p $k (keys $s.properties | sortAlpha | join ", ")) -}}
{{- end -}}
{{- end -}}
{{- range $s.required -}}
{{- if kindIs "invalid" (index $v .) -}}
{{- fail (printf "%s.%s: required" $p .) -}}
{{- end -}}
{{- end -}}
{{- range $k, $x := $v -}}
{{- include "dnsconfigurer.configCheckNode" (dict "v" $x "s" (get $s.properties $k) "p" (printf "%s.%s" $p $k)) -}}
{{- end -}}
{{- else if eq $t "array" -}}
{{- if and $s.minItems (lt (len $v) (int $s.minItems)) -}}
{{- fail (printf "%s: required: at least %d" $p (int $s.minItems)) -}}
{{- end -}}
{{- if and $s.maxItems (gt (len $v) (int $s.maxItems)) -}}
{{- fail (printf "%s: %d items: at most %d" $p (len $v) (int $s.maxItems)) -}}
{{- end -}}
{{- range $i, $x := $v -}}
{{- include "dnsconfigurer.configCheckNode" (dict "v" $x "s" $s.items "p" (printf "%s[%d]" $p $i)) -}}
{{- end -}}
{{- else if eq $t "string" -}}
{{- if and $s.enum (not (has $v $s.enum)) -}}
{{- $allowed := list -}}
{{- range $s.enum -}}{{- if . -}}{{- $allowed = append $allowed (quote .) -}}{{- end -}}{{- end -}}
{{- fail (printf "%s: %q: must be one of %s" $p $v (join ", " $allowed)) -}}
{{- end -}}
{{- if and $s.minLength (lt (len $v) (int $s.minLength)) -}}
{{- fail (printf "%s: required" $p) -}}
{{- end -}}
{{- if and $s.maxLength (gt (len $v) (int $s.maxLength)) -}}
{{- fail (printf "%s: %d characters: at most %d" $p (len $v) (int $s.maxLength)) -}}
{{- end -}}
{{- if and $s.pattern (not (regexMatch $s.pattern $v)) -}}
{{- fail (printf "%s: %q: %s" $p $v (index $s "x-says")) -}}
{{- end -}}
{{- $d := index $s "x-duration" -}}
{{- if and $d $v -}}
{{- $ns := include "dnsconfigurer.durationNanos" $v | float64 -}}
{{- if or (lt $ns (float64 $d.minNanos)) (gt $ns (float64 $d.maxNanos)) -}}
{{- fail (printf "%s: %q: must be between %s and %s" $p $v $d.min $d.max) -}}
{{- end -}}
{{- end -}}
{{- else if eq $t "integer" -}}
{{- $n := float64 $v -}}
{{- if not (and (index $s "x-zeroIsDefault") (eq $n 0.0)) -}}
{{- $lo := hasKey $s "minimum" -}}
{{- $hi := hasKey $s "maximum" -}}
{{- if or (and $lo (lt $n (float64 $s.minimum))) (and $hi (gt $n (float64 $s.maximum))) -}}
{{- if and $lo $hi -}}
{{- fail (printf "%s: %d: must be between %d and %d" $p (int64 $v) (int64 $s.minimum) (int64 $s.maximum)) -}}
{{- else if $lo -}}
{{- fail (printf "%s: %d: must be at least %d" $p (int64 $v) (int64 $s.minimum)) -}}
{{- else -}}
{{- fail (printf "%s: %d: must be at most %d" $p (int64 $v) (int64 $s.maximum)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A duration's nanoseconds (time.ParseDuration's units), as a float; the syntax is checked before. */}}
{{- define "dnsconfigurer.durationNanos" -}}
{{- $units := dict "ns" 1.0 "us" 1000.0 "µs" 1000.0 "μs" 1000.0 "ms" 1000000.0 "s" 1000000000.0 "m" 60000000000.0 "h" 3600000000000.0 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "([0-9]*[.]?[0-9]*)(ns|us|µs|μs|ms|s|m|h)" . -1 -}}
{{- $num := regexFind "^[0-9]*[.]?[0-9]*" . -}}
{{- $total = addf $total (mulf (float64 $num) (get $units (trimPrefix $num .))) -}}
{{- end -}}
{{- if hasPrefix "-" . -}}{{- $total = mulf $total -1.0 -}}{{- end -}}
{{- printf "%f" $total -}}
{{- end -}}
