package attack

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

func TestMain(m *testing.M) { os.Exit(buildbin.Main(m)) }

// The passes: `go test ./test/attack/` replays the kept seeds and draws
// shortRounds fresh scenarios; .ci/long sets the rounds.
const (
	shortRounds = 1
	ramp        = 2 * time.Second // the attacks take hold before clients ask
	maxWebhook  = 128 << 20       // the webhook's memory limit in deploy/ (and its GOMEMLIMIT)
)

var (
	roundsFlag = flag.Int("attack.rounds", -1, "fresh scenarios after the kept seeds (default $DNSCONFIGURER_ATTACK_ROUNDS, else 1)")
	seedFlag   = flag.String("attack.seed", "", "run only this seed (default $DNSCONFIGURER_ATTACK_SEED)")
	shapesFlag = flag.String("attack.shapes", "", "draw fresh scenarios of these shapes only, comma-separated (default $DNSCONFIGURER_ATTACK_SHAPES)")
	windowFlag = flag.Duration("attack.window", 6*time.Second, "how long legitimate clients ask beside the attacks")
)

// setting is a flag's value, else the environment's.
func setting(flagValue, env string) string {
	if flagValue != "" {
		return flagValue
	}
	return os.Getenv(env)
}

// TestAttack runs scenarios against the built binary: the kept seeds
// first, then fresh ones. A scenario that breaks the invariant fails with
// its seed, and a fresh one is kept in testdata/seeds.
func TestAttack(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the scenarios bind loopback aliases (127.0.0.x), which Linux routes without setup")
	}
	if err := canBindAliases(); err != nil {
		t.Skipf("cannot bind the loopback aliases 127.0.0.x: %v", err)
	}
	buildbin.Dnsconfigurer(t)
	if s := setting(*seedFlag, "DNSCONFIGURER_ATTACK_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("seed %q: %v", s, err)
		}
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runScenario(t, newScenario(seed), false) })
		return
	}
	kept, err := readSeeds(seedsFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range kept {
		t.Run(fmt.Sprintf("kept=%d", seed), func(t *testing.T) { runScenario(t, newScenario(seed), false) })
	}
	rounds := shortRounds
	if *roundsFlag >= 0 {
		rounds = *roundsFlag
	} else if s := os.Getenv("DNSCONFIGURER_ATTACK_ROUNDS"); s != "" {
		if rounds, err = strconv.Atoi(s); err != nil {
			t.Fatalf("DNSCONFIGURER_ATTACK_ROUNDS=%q: %v", s, err)
		}
	}
	var only []string
	if s := setting(*shapesFlag, "DNSCONFIGURER_ATTACK_SHAPES"); s != "" {
		only = strings.Split(s, ",")
	}
	for range rounds {
		sc := freshScenario(only)
		t.Run(fmt.Sprintf("fresh=%d", sc.seed), func(t *testing.T) { runScenario(t, sc, true) })
	}
}

// freshScenario draws a new seed, one whose attacks are all of only when
// it is given.
func freshScenario(only []string) *scenario {
	for {
		sc := newScenario(rand.Uint64())
		if len(only) == 0 || sc.only(only) {
			return sc
		}
	}
}

// runScenario starts the processes, runs the attacks, lets legitimate
// clients ask beside them, and checks the invariant. keep records a
// failed scenario's seed.
func runScenario(t *testing.T, sc *scenario, keep bool) {
	e := startEnv(t)
	t.Logf("%s", sc)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, a := range sc.attacks {
		wg.Go(func() { a.p.run(ctx, e, a) })
	}
	// The schedule, not a wait for a state: clients ask from ramp on.
	select {
	case <-time.After(ramp):
	case <-e.cluster.Exited():
	case <-e.nodeLocal.Exited():
	}
	l := runLegit(e, *windowFlag)
	stop()
	wg.Wait()

	for _, a := range sc.attacks {
		t.Logf("%s did: %s", a.shape, &a.st)
	}
	var broken []string
	for _, c := range l.classes() {
		t.Logf("%s", c)
		if v := c.violated(); v != "" {
			broken = append(broken, v)
		}
	}
	rss, err := peakRSS(e.webhook.Cmd.Process.Pid)
	t.Logf("webhook peak RSS %d MiB (%v)", rss>>20, err)
	if err == nil && rss > maxWebhook {
		broken = append(broken, fmt.Sprintf("webhook peak RSS %d MiB, over %d MiB", rss>>20, maxWebhook>>20))
	}
	for _, a := range sc.attacks {
		for _, b := range a.st.brokenBounds() {
			broken = append(broken, a.shape+": "+b)
		}
	}
	for _, p := range []*buildbin.Proc{e.cluster.Proc, e.nodeLocal.Proc, e.webhook.Proc} {
		if p.HasExited() {
			broken = append(broken, p.Name+" exited")
		}
	}
	if len(broken) == 0 {
		return
	}
	t.Errorf("%s\nbroken:\n  %s\nrerun: DNSCONFIGURER_ATTACK_SEED=%d go test -count=1 -run TestAttack ./test/attack/",
		sc.report(), strings.Join(broken, "\n  "), sc.seed)
	if keep {
		if err := keepSeed(seedsFile, sc.seed, "drew "+sc.shapeNames()+"; broke: "+strings.Join(broken, "; ")); err != nil {
			t.Errorf("keep the seed: %v", err)
		}
	}
}
