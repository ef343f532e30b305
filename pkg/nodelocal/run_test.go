package nodelocal

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// TestStageConfigErrors: a configuration the stage cannot apply fails
// NewStage or Run with an error marked v1alpha1.ErrConfig; a wrong mode is
// a caller's bug, not marked.
func TestStageConfigErrors(t *testing.T) {
	tests := []struct {
		name   string
		change func(*v1alpha1.ServerConfiguration)
		marked bool
		msg    string // the error, when given
	}{
		{"cluster mode", func(c *v1alpha1.ServerConfiguration) { c.Mode = v1alpha1.ModeCluster }, false, ""},
		{"cluster upstream is the stage", func(c *v1alpha1.ServerConfiguration) { c.NodeLocal.ClusterUpstream = []string{"127.0.0.1:5399"} }, true, ""},
		{"cluster config missing", func(c *v1alpha1.ServerConfiguration) { c.NodeLocal.ClusterConfig = "/nonexistent/config.yaml" }, true, ""},
		// The rule is v1alpha1.ValidateClusterDomain's, under the field's name.
		{"bad cluster domain", func(c *v1alpha1.ServerConfiguration) { c.ClusterDomain = "cluster..local" }, true,
			`clusterDomain: "cluster..local" is not a domain such as "cluster.local": has an empty label`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			none := ""
			cfg := &v1alpha1.ServerConfiguration{Mode: v1alpha1.ModeNodeLocal, Listen: []string{"127.0.0.1:5399"},
				NodeLocal: v1alpha1.NodeLocal{ClusterUpstream: []string{"127.0.0.1:5398"}, ResolvConf: &none}}
			tc.change(cfg)
			cfg.SetDefaults()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			stage, err := NewStage(cfg, Deps{LoadConfig: loadFile})
			if err == nil {
				err = stage.Run(ctx)
			}
			if err == nil || ctx.Err() != nil {
				t.Fatalf("err %v (context: %v), want a failure at start", err, ctx.Err())
			}
			if got := errors.Is(err, v1alpha1.ErrConfig); got != tc.marked {
				t.Errorf("%v: marked ErrConfig %v, want %v", err, got, tc.marked)
			}
			if tc.msg != "" && err.Error() != tc.msg {
				t.Errorf("err %q, want %q", err, tc.msg)
			}
		})
	}
}
