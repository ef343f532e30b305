package main

import (
	"bytes"
	"fmt"

	"github.com/dnsconfigurer/dnsconfigurer/internal/safefile"
	"sigs.k8s.io/yaml"
)

// maxConfigBytes bounds a config file; a complete one is a few KiB.
const maxConfigBytes = 1 << 20

// configFile is a versioned config type from api/v1alpha1.
type configFile interface {
	CheckKind(kind string) error
	SetDefaults()
	Validate() error
}

// loadConfig reads a YAML or JSON config file strictly (unknown fields are
// errors) into cfg, checks apiVersion and kind, applies defaults and
// validates. Errors name the file and the field.
func loadConfig(path, kind string, cfg configFile) error {
	data, err := safefile.ReadNamed(path, maxConfigBytes)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return fmt.Errorf("config %q is empty", path)
	}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return fmt.Errorf("config %q: %v", path, err)
	}
	if err := cfg.CheckKind(kind); err != nil {
		return fmt.Errorf("config %q: %w", path, err)
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("config %q: %w", path, err)
	}
	return nil
}
