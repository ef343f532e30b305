package nriplugin

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// TestRunRetries checks that Run keeps registering while the runtime's
// socket is missing and returns nil once its context is done.
func TestRunRetries(t *testing.T) {
	var logs testkit.Buffer
	p := newPlugin(t, WithSocket(filepath.Join(t.TempDir(), "missing.sock")), WithBackoff(time.Millisecond, 4*time.Millisecond))
	p.log = textLogger(&logs)
	run := testkit.Go(t, "Run", p.Run)
	testkit.WaitFor(t, 10*time.Second, func() error {
		select {
		case <-run.Done():
			t.Fatalf("Run returned %v before retrying", run.Err())
		default:
		}
		if n := strings.Count(logs.String(), "registering again"); n < 3 {
			return fmt.Errorf("%d retries logged:\n%s", n, logs.String())
		}
		return nil
	})
	if p.Connected() {
		t.Error("Connected() = true without a runtime")
	}
	run.Stop()
}
