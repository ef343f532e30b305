package nodenet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// Defaults of Config.
const (
	DefaultInterface = v1alpha1.DefaultNodeLocalInterface
	DefaultPort      = 53
	DefaultInterval  = time.Minute
)

// Config is what the Manager sets up.
type Config struct {
	// IPs are the node-local addresses (169.254.20.10, the cluster DNS
	// Service IP); at least one.
	IPs []netip.Addr
	// Port is the DNS port of the rules (53).
	Port uint16
	// SetupInterface puts IPs on Interface ("nodelocaldns": a dummy device,
	// or lo without the dummy type) and removes them on Teardown: the
	// whole device when this project made it (LinkAlias), else only the
	// addresses it added (AddrProto).
	SetupInterface bool
	Interface      string
	// SetupNotrack installs the notrack table and removes it on Teardown.
	SetupNotrack bool
	// SkipTeardown leaves both in place on Teardown.
	SkipTeardown bool
	// LockFile is the lease every instance on the node shares (required).
	LockFile string
	// Interval is how often Keep re-checks the setup (1m).
	Interval time.Duration
	// Links and Notrack reach the kernel (required).
	Links   Links
	Notrack Notrack
	// Logger (default: discard).
	Logger *slog.Logger
}

// Manager owns the node-local setup of one instance.
type Manager struct {
	cfg   Config
	log   *slog.Logger
	lease *Lease

	mu  sync.Mutex
	dev string // where the addresses are: cfg.Interface or "lo"
	// ownDevice: dev carries LinkAlias (made now or by an earlier
	// instance), removed whole on teardown.
	ownDevice bool
	// ours are the addresses on dev this project put there: added by this
	// process or found with AddrProto. Only they are removed from a device
	// that is not ours.
	ours       map[netip.Addr]bool
	foreign    bool  // dev is someone else's interface (logged once)
	toldOthers bool  // others' addresses on dev were logged
	last       *bool // the teardown decision, made once
	released   bool

	repairs    [3]atomic.Uint64 // by what
	errs       atomic.Uint64
	setupOK    atomic.Bool
	repairDesc *prometheus.Desc
	errDesc    *prometheus.Desc
	okDesc     *prometheus.Desc
}

const (
	whatAddress = iota
	whatNotrack
	whatInterface
)

var whatNames = [...]string{"address", "notrack", "interface"}

// New checks cfg and returns its Manager; it changes nothing yet.
func New(cfg Config) (*Manager, error) {
	if len(cfg.IPs) == 0 {
		return nil, errors.New("nodenet: no address")
	}
	for i, ip := range cfg.IPs {
		if !ip.IsValid() || ip.IsLoopback() || ip.IsUnspecified() || ip.Zone() != "" {
			return nil, fmt.Errorf("nodenet: IPs[%d] %q: not a usable node-local address", i, ip)
		}
		cfg.IPs[i] = ip.Unmap()
	}
	if cfg.Port == 0 {
		cfg.Port = DefaultPort
	}
	if cfg.Interface == "" {
		cfg.Interface = DefaultInterface
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.LockFile == "" {
		return nil, errors.New("nodenet: no lock file")
	}
	if (cfg.SetupInterface && cfg.Links == nil) || (cfg.SetupNotrack && cfg.Notrack == nil) {
		return nil, errors.New("nodenet: Links and Notrack are required for what is set up")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{cfg: cfg, log: log.With("component", "nodenet"), dev: cfg.Interface, ours: map[netip.Addr]bool{},
		repairDesc: prometheus.NewDesc("dnsconfigurer_nodenet_repairs_total",
			"Parts of the node-local setup found missing by the periodic check and put back, by what (address, notrack, interface).", []string{"what"}, nil),
		errDesc: prometheus.NewDesc("dnsconfigurer_nodenet_errors_total",
			"Failed attempts to set up, check or remove the node-local addresses or notrack table.", nil, nil),
		okDesc: prometheus.NewDesc("dnsconfigurer_nodenet_setup_ok",
			"1 when the last set-up or check found every address and the notrack table in place.", nil, nil),
	}, nil
}

// Device is the interface holding the addresses (after Prepare).
func (m *Manager) Device() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dev
}

// Prepare takes the node's lease, waiting while another instance tears
// down; removes a notrack table left by a killed instance when no other
// instance runs (the Service IP is the cluster DNS's until this one
// serves); and puts the addresses in place (with SetupInterface).
func (m *Manager) Prepare(ctx context.Context) error {
	l, err := Acquire(ctx, m.cfg.LockFile)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.lease = l
	m.mu.Unlock()
	if m.cfg.SetupNotrack && !m.cfg.SkipTeardown && l.Alone() {
		removed, err := m.cfg.Notrack.Remove()
		if err != nil {
			m.errs.Add(1)
			return err
		}
		if removed {
			m.log.Warn("removed the notrack table a previous instance left (killed, or --skip-teardown): the Service IP goes to the cluster DNS until this instance serves", "table", TableName)
		}
	}
	if !m.cfg.SetupInterface {
		return nil
	}
	if _, _, err := m.ensureAddrs(); err != nil {
		m.errs.Add(1)
		return err
	}
	return nil
}

// ensureAddrs puts the device and every address in place; it reports
// whether it made the device and how many addresses it added.
func (m *Manager) ensureAddrs() (madeDevice bool, addedAddrs int, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	links := m.cfg.Links
	if m.dev != "lo" {
		if madeDevice, err = m.ensureDevice(); err != nil {
			return false, 0, err
		}
	}
	have, err := links.Addrs(m.dev)
	if err != nil {
		return madeDevice, 0, err
	}
	var added, others []netip.Addr
	for _, ip := range m.cfg.IPs {
		i := slices.IndexFunc(have, func(a Addr) bool { return a.IP == ip })
		switch {
		case i >= 0 && (have[i].Ours || m.ownDevice):
			m.ours[ip] = true // an earlier instance's: removed with ours
		case i >= 0:
			if !m.ours[ip] && !m.toldOthers {
				others = append(others, ip)
			}
		default:
			if err := links.AddAddr(m.dev, ip); err != nil {
				return madeDevice, len(added), err
			}
			m.ours[ip] = true
			added = append(added, ip)
		}
	}
	if len(added) > 0 {
		m.log.Info("node-local addresses in place", "device", m.dev, "added", added)
	}
	if len(others) > 0 {
		m.toldOthers = true
		m.log.Info("node-local addresses already on the device, not ours: left there on stop", "device", m.dev, "addresses", others)
	}
	return madeDevice, len(added), nil
}

// ensureDevice makes cfg.Interface unless it exists; without the dummy
// type the addresses go on lo. An interface without LinkAlias is someone
// else's: it gets the addresses but is never deleted. Called with mu held.
func (m *Manager) ensureDevice() (made bool, err error) {
	found, ours, err := m.cfg.Links.Lookup(m.cfg.Interface)
	if err != nil {
		return false, err
	}
	switch {
	case found && ours:
		m.ownDevice = true
	case found:
		if m.ownDevice {
			clear(m.ours) // ours was replaced: what it held went with it
		}
		m.ownDevice = false
		if !m.foreign {
			m.foreign = true
			m.log.Warn("interface exists and was not made by dnsconfigurer: adding the addresses to it, and on stop removing only those added", "interface", m.cfg.Interface)
		}
	default:
		if err := m.cfg.Links.AddDummy(m.cfg.Interface); err != nil {
			m.log.Info("no dummy interface: the addresses go on lo", "interface", m.cfg.Interface, "err", err)
			m.dev, m.ownDevice = "lo", false
			return false, nil
		}
		clear(m.ours)
		m.ownDevice, m.foreign = true, false
		return true, nil
	}
	return false, nil
}

// EnsureNotrack installs the notrack table unless it is in place.
func (m *Manager) EnsureNotrack() (repaired bool, err error) {
	if !m.cfg.SetupNotrack {
		return false, nil
	}
	ok, err := m.cfg.Notrack.Present(m.cfg.IPs, m.cfg.Port)
	if err != nil {
		m.errs.Add(1)
		return false, err
	}
	if ok {
		return false, nil
	}
	if err := m.cfg.Notrack.Apply(m.cfg.IPs, m.cfg.Port); err != nil {
		m.errs.Add(1)
		return false, err
	}
	m.log.Info("notrack table in place", "table", TableName, "addresses", m.cfg.IPs, "port", m.cfg.Port)
	return true, nil
}

// Keep installs the notrack table, then re-checks the addresses and the
// table every Interval until ctx ends, putting back what is missing
// (dnsconfigurer_nodenet_repairs_total). Call it once the stage serves the
// addresses.
func (m *Manager) Keep(ctx context.Context) error {
	_, err := m.EnsureNotrack()
	if err != nil {
		m.log.Error("notrack table", "err", err)
	}
	m.setupOK.Store(err == nil)
	tick := time.NewTicker(m.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		m.check()
	}
}

// check is one periodic re-check.
func (m *Manager) check() {
	ok := true
	if m.cfg.SetupInterface {
		madeDevice, addedAddrs, err := m.ensureAddrs()
		if err != nil {
			m.errs.Add(1)
			m.log.Error("node-local addresses", "err", err)
			ok = false
		}
		if madeDevice {
			m.repairs[whatInterface].Add(1)
		}
		m.repairs[whatAddress].Add(uint64(addedAddrs))
	}
	repaired, err := m.EnsureNotrack()
	if err != nil {
		m.log.Error("notrack table", "err", err)
		ok = false
	}
	if repaired {
		m.repairs[whatNotrack].Add(1)
	}
	m.setupOK.Store(ok)
}

// teardown reports whether this instance removes the setup: not with
// SkipTeardown, nor while another instance holds the lease. Decided once.
func (m *Manager) teardown() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		last := !m.cfg.SkipTeardown && m.lease != nil && m.lease.Last()
		m.last = &last
		if !last {
			m.log.Info("leaving the node-local setup in place", "skipTeardown", m.cfg.SkipTeardown)
		}
	}
	return *m.last
}

// currentLease is the lease Prepare took, or nil before it.
func (m *Manager) currentLease() *Lease {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lease
}

// Superseded reports whether an instance that started after this one runs
// on the node, the one that takes over, and whether the newest serves
// (Lease.Newer).
func (m *Manager) Superseded() (newer, serving bool) {
	l := m.currentLease()
	if l == nil {
		return false, false
	}
	return l.Newer()
}

// Serving records whether this instance serves, for an older one's
// Superseded.
func (m *Manager) Serving(on bool) {
	l := m.currentLease()
	if l == nil {
		return
	}
	if err := l.Serving(on); err != nil {
		m.errs.Add(1)
		m.log.Error("lease entry", "err", err)
	}
}

// RemoveNotrack removes the notrack table when this instance tears down,
// so that the addresses that are Service IPs fall back to their Service.
func (m *Manager) RemoveNotrack() error {
	if !m.cfg.SetupNotrack || !m.teardown() {
		return nil
	}
	if _, err := m.cfg.Notrack.Remove(); err != nil {
		m.errs.Add(1)
		return err
	}
	m.log.Info("notrack table removed", "table", TableName)
	return nil
}

// Release removes the addresses when this instance tears down (the whole
// device when it is ours), then releases the lease. Later calls do nothing.
func (m *Manager) Release() error {
	m.mu.Lock()
	done := m.released
	m.released = true
	m.mu.Unlock()
	if done {
		return nil
	}
	var err error
	if m.cfg.SetupInterface && m.teardown() {
		err = m.removeAddrs()
		if err != nil {
			m.errs.Add(1)
		}
	}
	if m.lease != nil {
		m.lease.Close()
	}
	return err
}

// removeAddrs deletes the device when it still carries LinkAlias, and
// otherwise removes only the addresses this project put on it.
func (m *Manager) removeAddrs() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dev != "lo" && m.ownDevice {
		found, ours, err := m.cfg.Links.Lookup(m.dev)
		switch {
		case err != nil:
			return err
		case !found:
			return nil
		case ours:
			if err := m.cfg.Links.Delete(m.dev); err != nil {
				return err
			}
			m.log.Info("node-local interface removed", "interface", m.dev)
			return nil
		}
	}
	var errs []error
	var removed []netip.Addr
	for _, ip := range m.cfg.IPs {
		if !m.ours[ip] {
			continue
		}
		if err := m.cfg.Links.DelAddr(m.dev, ip); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, ip)
	}
	m.log.Info("node-local addresses removed", "device", m.dev, "addresses", removed)
	return errors.Join(errs...)
}

var _ prometheus.Collector = (*Manager)(nil)

// Describe implements prometheus.Collector.
func (m *Manager) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.repairDesc
	ch <- m.errDesc
	ch <- m.okDesc
}

// Collect implements prometheus.Collector.
func (m *Manager) Collect(ch chan<- prometheus.Metric) {
	for i, name := range whatNames {
		ch <- prometheus.MustNewConstMetric(m.repairDesc, prometheus.CounterValue, float64(m.repairs[i].Load()), name)
	}
	ch <- prometheus.MustNewConstMetric(m.errDesc, prometheus.CounterValue, float64(m.errs.Load()))
	ok := 0.0
	if m.setupOK.Load() {
		ok = 1
	}
	ch <- prometheus.MustNewConstMetric(m.okDesc, prometheus.GaugeValue, ok)
}
