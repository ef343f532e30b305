package apiserver

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// startTimeout bounds RunTests' and StartT's start-up. A cold start takes
// several seconds; a loaded CI machine can take much longer.
const startTimeout = 3 * time.Minute

// skipReason is why RunTests left the control plane nil, for Require.
var skipReason string

// RunTests is the body of a TestMain: it starts a control plane, stores it
// in *cp, runs the package's tests and closes it, returning the exit code
// for os.Exit. Tests reach the control plane through Require(t, *cp).
//
// When the binaries are absent, or under go test -short, *cp stays nil,
// the other tests still run and Require skips. When $DNSCONFIGURER_TESTBIN
// is set, missing binaries fail the package instead, so CI cannot pass by
// skipping. A control plane that fails to start fails the package.
func RunTests(m *testing.M, cp **ControlPlane, opts ...Option) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	if testing.Short() {
		skipReason = "apiserver: integration test skipped in -short mode"
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	c, err := Start(ctx, opts...)
	cancel()
	switch {
	case errors.Is(err, ErrNoBinaries) && os.Getenv(EnvBinDir) == "":
		skipReason = err.Error()
		fmt.Fprintf(os.Stderr, "%v\nintegration tests will skip\n", err)
		return m.Run()
	case err != nil:
		fmt.Fprintf(os.Stderr, "start control plane: %v\n", err)
		return 1
	}
	*cp = c
	code := m.Run()
	if err := c.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "close control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Require returns cp, or skips the test when RunTests left it nil because
// the binaries are absent or under -short.
func Require(t testing.TB, cp *ControlPlane) *ControlPlane {
	t.Helper()
	if cp != nil {
		return cp
	}
	if skipReason == "" {
		t.Fatal("apiserver: no control plane: call apiserver.RunTests from TestMain")
	}
	t.Skip(skipReason)
	return nil
}

// StartT starts a control plane of the test's own, closed when the test
// ends. It skips like Require. Prefer one shared control plane per package
// (RunTests); this is for tests that break theirs.
func StartT(t testing.TB, opts ...Option) *ControlPlane {
	t.Helper()
	if testing.Short() {
		t.Skip("apiserver: integration test skipped in -short mode")
	}
	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	cp, err := Start(ctx, opts...)
	if errors.Is(err, ErrNoBinaries) && os.Getenv(EnvBinDir) == "" {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Close(); err != nil {
			t.Errorf("close control plane: %v", err)
		}
	})
	return cp
}

// Namespace creates a namespace for the test, named after it with a random
// suffix, and returns its name. Namespaces are not deleted: without the
// namespace controller a deleted one stays Terminating with its contents,
// and the whole control plane goes away with the test binary anyway.
func (cp *ControlPlane) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: namePrefix(t.Name())}}
	ns, err := cp.client.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

// namePrefix turns a test name into a GenerateName prefix: a lowercase DNS
// label of at most 40 characters ending in "-".
func namePrefix(testName string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(testName) {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		switch {
		case ok:
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 40 {
			break
		}
	}
	s := strings.TrimRight(b.String(), "-")
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		s = "t" + s
	}
	return s + "-"
}
