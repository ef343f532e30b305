package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// With DNSCONFIGURER_CHURN_QUERY_NICE the query load runs in a process of
// its own: the test binary again, running TestQueryLoadChild only, at that
// nice value. Its timing then shares no goroutine scheduler with the
// writer, the poller and client-go, and a nice value below theirs lets it
// read each reply as it comes, as a client on a machine of its own would.
// Without it the load runs in the test process, as before.

// envQueryChild names the directory of a child's job and result.
const envQueryChild = "DNSCONFIGURER_QUERY_CHILD"

// queryJob is what the child is asked to do.
type queryJob struct {
	Addr  string
	QPS   int
	For   time.Duration
	Names []string
}

// queryResult is what the child found: queryStats, exported.
type queryResult struct {
	Sent, Answered, Wrong, Lost int
	P50, P99                    time.Duration
}

// TestQueryLoadChild is the query load's child process; it runs only
// with envQueryChild set.
func TestQueryLoadChild(t *testing.T) {
	dir := os.Getenv(envQueryChild)
	if dir == "" {
		t.Skip("the query load's child process only")
	}
	var job queryJob
	b, err := os.ReadFile(filepath.Join(dir, "job.json"))
	if err == nil {
		err = json.Unmarshal(b, &job)
	}
	if err != nil {
		t.Fatalf("the job: %v", err)
	}
	res, err := flood(job.Addr, func(n int) string { return job.Names[n%len(job.Names)] }, job.QPS, job.For, queryDrain)
	if err != nil {
		t.Fatal(err)
	}
	st := queryStatsOf(res)
	b, err = json.Marshal(queryResult{Sent: st.sent, Answered: st.answered, Wrong: st.wrong, Lost: st.lost, P50: st.p50, P99: st.p99})
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "result.json"), b, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// queryLoadChild runs the query load of queryLoad in a child process at
// nice value nice, on the CPUs cpus unless nil.
func queryLoadChild(t *testing.T, addr string, names []string, qps int, d time.Duration, nice int, cpus *unix.CPUSet) (queryStats, error) {
	t.Helper()
	dir := t.TempDir()
	b, err := json.Marshal(queryJob{Addr: addr, QPS: qps, For: d, Names: names})
	if err != nil {
		return queryStats{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, "job.json"), b, 0o644); err != nil {
		return queryStats{}, err
	}
	cmd := exec.Command("nice", "-n", strconv.Itoa(nice), os.Args[0], "-test.run", "^TestQueryLoadChild$", "-test.count", "1")
	cmd.Env = append(os.Environ(), envQueryChild+"="+dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return queryStats{}, fmt.Errorf("the query load's process: %w", err)
	}
	// The child reads its job before it sends a query; it is set apart
	// long before.
	if cpus != nil {
		if err := setAffinity(cmd.Process.Pid, cpus); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return queryStats{}, err
		}
	}
	if err := cmd.Wait(); err != nil {
		return queryStats{}, fmt.Errorf("the query load's process: %w\n%s", err, out.Bytes())
	}
	var r queryResult
	b, err = os.ReadFile(filepath.Join(dir, "result.json"))
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err != nil {
		return queryStats{}, fmt.Errorf("the query load's result: %w", err)
	}
	return queryStats{sent: r.Sent, answered: r.Answered, wrong: r.Wrong, lost: r.Lost, p50: r.P50, p99: r.P99}, nil
}

// TestQueryLoadInChild: the query load run in a child process at a nice
// value counts every query it sent, and the stub answers them.
func TestQueryLoadInChild(t *testing.T) {
	up := startStub(t)
	st, err := queryLoadChild(t, up.addr, []string{"a." + externalZone, "b." + externalZone}, 200, time.Second, 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The paced generator sends about qps × duration: its last tick may
	// fall after the end.
	if st.sent < 180 || st.sent > 200 || st.answered+st.wrong+st.lost != st.sent || st.answered == 0 || st.p99 <= 0 {
		t.Errorf("the child's load: %+v; want about 200 sent, each answered, wrong or lost, and latencies", st)
	}
	if got := up.queries.Load(); got == 0 || got > 200 {
		t.Errorf("the stub saw %d queries, want 1-200", got)
	}
}
