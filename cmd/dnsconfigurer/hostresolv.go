package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/logflags"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// snapshotJSON is one line of `hostresolv` output.
type snapshotJSON struct {
	Path       string `json:"path"`
	Disabled   bool   `json:"disabled,omitempty"`
	Generation uint64 `json:"generation"`
	Hash       string `json:"hash"`
	resolvconf.Config
	DroppedLoopback []string `json:"droppedLoopback,omitempty"`
	Problem         string   `json:"problem,omitempty"`
	Error           string   `json:"error,omitempty"`
}

func toJSON(s hostresolv.Snapshot) snapshotJSON {
	j := snapshotJSON{Path: s.Path, Disabled: s.Disabled, Generation: s.Generation, Hash: s.Hash,
		Config: s.Config.Filled(), DroppedLoopback: s.DroppedLoopback}
	j.Problem, j.Error = s.Messages()
	return j
}

func runHostresolv(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("hostresolv", stderr, "usage: dnsconfigurer hostresolv [--resolv-conf PATH|auto] [--watch] [--mode last-good|strict]")
	path := fs.String("resolv-conf", v1alpha1.DefaultResolvConf, `node resolver file; "auto" follows systemd-resolved, "" is kubelet's resolvConf switched off`)
	watch := fs.Bool("watch", false, "keep running and print every change as one JSON line")
	mode := fs.String("mode", v1alpha1.DefaultResolvConfMode, "last-good (keep the last good config while the file is broken) or strict (kubelet)")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	m, err := hostresolv.ParseMode(*mode)
	if err != nil {
		return usageExit(stderr, "hostresolv", fmt.Errorf("--mode: %w", err))
	}
	log, _ := newLogger(stderr, logText, v1alpha1.DefaultLogLevel) // constants: no error
	if *watch {
		logflags.Start(log, "hostresolv")
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := hostresolv.Watch(wctx, *path, hostresolv.WithMode(m), hostresolv.WithLogger(log))
	if err != nil {
		if wctx.Err() != nil {
			return exitOK // stopped (SIGTERM) before the first read finished
		}
		fmt.Fprintf(stderr, "hostresolv: %v\n", err)
		return exitFail
	}
	enc := json.NewEncoder(stdout)
	if !*watch {
		s := w.Current()
		enc.Encode(toJSON(s))
		if s.Err != nil {
			return exitFail
		}
		return exitOK
	}
	ch, unsub := w.Subscribe()
	defer unsub()
	for s := range ch {
		if err := enc.Encode(toJSON(s)); err != nil {
			return exitFail
		}
	}
	return exitOK
}
