package stream

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/sink/appender"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(*Config)
		wantErr string
	}{
		{"defaults with brokers", func(*Config) {}, ""},
		{"hold off", func(c *Config) { c.ListingHold = 0 }, ""},
		{"no brokers", func(c *Config) { c.Brokers = nil }, "no brokers"},
		{"no group", func(c *Config) { c.Group = "" }, "empty group"},
		{"no dlq", func(c *Config) { c.DLQTopic = "" }, "empty topic"},
		{"same topics", func(c *Config) { c.DLQTopic = c.CallsTopic }, "must differ"},
		{"no audit topic", func(c *Config) { c.AuditTopic = "" }, ""},
		{"audit topic is the calls topic", func(c *Config) { c.AuditTopic = c.CallsTopic }, "audit topic"},
		{"audit topic is the DLQ", func(c *Config) { c.AuditTopic = c.DLQTopic }, "audit topic"},
		{"batch rows", func(c *Config) { c.BatchRows = 0 }, "batch rows"},
		{"batch bytes", func(c *Config) { c.BatchBytes = 0 }, "batch bytes"},
		{"batch idle", func(c *Config) { c.BatchIdle = -time.Second }, "batch idle"},
		{"batch wait", func(c *Config) { c.BatchWait = 0 }, "batch wait"},
		{"negative hold", func(c *Config) { c.ListingHold = -time.Second }, "listing hold"},
		{"listings poll", func(c *Config) { c.ListingsPoll = 0 }, "listings poll"},
		{"analysis", func(c *Config) { c.AnalysisID = "" }, "analysis id"},
		{"mode", func(c *Config) { c.Resolver.Mode = resolve.Mode(9) }, "resolver mode"},
		{"buffer", func(c *Config) { c.MaxPartitionBuffer = 0 }, "max partition buffer"},
		{"fetch bytes", func(c *Config) { c.FetchMaxBytes = 0 }, "fetch max bytes"},
		{"fetch wait", func(c *Config) { c.FetchMaxWait = 0 }, "fetch max wait"},
		{"backoff", func(c *Config) { c.RetryMax = c.RetryMin / 2 }, "retry backoff"},
		{"drain", func(c *Config) { c.DrainTimeout = 0 }, "drain timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Brokers = []string{"localhost:9092"}
			tc.edit(&cfg)
			err := cfg.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate = %v, want %q", err, tc.wantErr)
			}
			if _, err := New(cfg, registry.New(), appender.SinkFunc(nil), nil, nil); !errors.Is(err, ErrConfig) {
				t.Fatalf("New = %v, want ErrConfig", err)
			}
		})
	}
}

func TestPolicyVersion(t *testing.T) {
	cfg := DefaultConfig()
	if got := cfg.policyVersion(); got != "strict" {
		t.Errorf("default policy %q", got)
	}
	cfg.Resolver.Mode = resolve.PinAssisted
	if got := cfg.policyVersion(); got != "pin-assisted" {
		t.Errorf("pin-assisted policy %q", got)
	}
	cfg.PolicyVersion = "strict/v7"
	if got := cfg.policyVersion(); got != "strict/v7" {
		t.Errorf("explicit policy %q", got)
	}
}
