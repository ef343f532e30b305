package imagebuild

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestDockerfile checks that the repository's Dockerfile, which cannot be
// built here, makes the image Build makes: the same binary path,
// entrypoint, user, build flags and labels, on distroless' static nonroot
// base.
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	// Instructions, with continuation lines joined and comments dropped.
	var instrs []string
	var cur strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if body, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(body)
			continue
		}
		cur.WriteString(trimmed)
		instrs = append(instrs, strings.Join(strings.Fields(cur.String()), " "))
		cur.Reset()
	}
	// The final stage: from the last FROM on.
	last := -1
	for i, in := range instrs {
		if strings.HasPrefix(in, "FROM ") {
			last = i
		}
	}
	if last < 0 {
		t.Fatal("Dockerfile: no FROM")
	}
	build, final := instrs[:last], instrs[last:]
	if final[0] != "FROM gcr.io/distroless/static-debian12:nonroot" {
		t.Errorf("final stage %q, want FROM gcr.io/distroless/static-debian12:nonroot", final[0])
	}
	var entrypoint []string
	var user, copyDst string
	labels := map[string]bool{}
	for _, in := range final[1:] {
		verb, args, _ := strings.Cut(in, " ")
		switch verb {
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(args), &entrypoint); err != nil {
				t.Errorf("ENTRYPOINT %s: want the JSON form: %v", args, err)
			}
		case "USER":
			user = args
		case "COPY":
			f := strings.Fields(args)
			copyDst = f[len(f)-1]
		case "LABEL":
			for _, kv := range strings.Fields(args) {
				k, _, _ := strings.Cut(kv, "=")
				labels[k] = true
			}
		case "ENV":
			if args != "SSL_CERT_FILE="+CACertsPath {
				t.Errorf("ENV %s, want SSL_CERT_FILE=%s", args, CACertsPath)
			}
		}
	}
	if !reflect.DeepEqual(entrypoint, []string{BinaryPath}) {
		t.Errorf("ENTRYPOINT %q, want [%q]", entrypoint, BinaryPath)
	}
	if user != User {
		t.Errorf("USER %q, want %q", user, User)
	}
	if copyDst != BinaryPath {
		t.Errorf("the final stage copies the binary to %q, want %q", copyDst, BinaryPath)
	}
	for _, l := range []string{"org.opencontainers.image.version", "org.opencontainers.image.revision", "org.opencontainers.image.source"} {
		if !labels[l] {
			t.Errorf("no LABEL %s", l)
		}
	}
	if !strings.Contains(string(data), "org.opencontainers.image.source="+Source) {
		t.Errorf("the source label is not %s", Source)
	}

	var goBuild string
	for _, in := range build {
		if strings.HasPrefix(in, "RUN ") && strings.Contains(in, " go build ") {
			goBuild = in
		}
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-buildvcs=false",
		`-ldflags "` + LDFlags("${VERSION}", "${REVISION}") + `"`, Package} {
		if !strings.Contains(goBuild, want) {
			t.Errorf("the builder's go build %q lacks %q", goBuild, want)
		}
	}
}
