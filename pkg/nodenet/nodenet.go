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
)

// Defaults of Config.
const (
	DefaultInterface = "nodelocaldns"
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
	// or lo without the dummy type) and removes them on Teardown.
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
	// ownDevice: dev is a dummy device this setup uses (made now or by an
	// earlier instance), removed whole on teardown.
	ownDevice bool
	last      *bool // the teardown decision, made once

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
	return &Manager{cfg: cfg, log: log.With("component", "nodenet"), dev: cfg.Interface,
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
// down, and puts the addresses in place (with SetupInterface).
func (m *Manager) Prepare(ctx context.Context) error {
	l, err := Acquire(ctx, m.cfg.LockFile)
	if err != nil {
		return err
	}
	m.lease = l
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
	var added []netip.Addr
	if m.dev != "lo" {
		ok, err := links.Exists(m.cfg.Interface)
		if err != nil {
			return false, 0, err
		}
		switch {
		case ok:
			m.ownDevice = true
		default:
			if err := links.AddDummy(m.cfg.Interface); err != nil {
				m.log.Info("no dummy interface: the addresses go on lo", "interface", m.cfg.Interface, "err", err)
				m.dev, m.ownDevice = "lo", false
			} else {
				m.ownDevice, madeDevice = true, true
			}
		}
	}
	have, err := links.Addrs(m.dev)
	if err != nil {
		return madeDevice, 0, err
	}
	for _, ip := range m.cfg.IPs {
		if slices.Contains(have, ip) {
			continue
		}
		if err := links.AddAddr(m.dev, ip); err != nil {
			return madeDevice, len(added), err
		}
		added = append(added, ip)
	}
	if len(added) > 0 {
		m.log.Info("node-local addresses in place", "device", m.dev, "added", added)
	}
	return madeDevice, len(added), nil
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

// RemoveNotrack removes the notrack table when this instance tears down,
// so that the addresses that are Service IPs fall back to their Service.
func (m *Manager) RemoveNotrack() error {
	if !m.cfg.SetupNotrack || !m.teardown() {
		return nil
	}
	if err := m.cfg.Notrack.Remove(); err != nil {
		m.errs.Add(1)
		return err
	}
	m.log.Info("notrack table removed", "table", TableName)
	return nil
}

// Release removes the addresses (the whole device when it is the dummy)
// when this instance tears down, then releases the lease.
func (m *Manager) Release() error {
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

func (m *Manager) removeAddrs() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ownDevice {
		if err := m.cfg.Links.Delete(m.dev); err != nil {
			return err
		}
		m.log.Info("node-local interface removed", "interface", m.dev)
		return nil
	}
	var errs []error
	for _, ip := range m.cfg.IPs {
		errs = append(errs, m.cfg.Links.DelAddr(m.dev, ip))
	}
	m.log.Info("node-local addresses removed", "device", m.dev, "addresses", m.cfg.IPs)
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
