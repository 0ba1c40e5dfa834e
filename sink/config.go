package sink

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultDatabase is the database of the store unless configured otherwise.
const DefaultDatabase = "toolaudit"

// Config configures NewClickHouse. A zero field takes the value of the same
// field in DefaultConfig.
type Config struct {
	// Addr lists native-protocol addresses, "host:port"; several are tried
	// in order. Default ["127.0.0.1:9000"].
	Addr []string
	// Database holds table decisions. Default "toolaudit".
	Database string
	// Username and Password authenticate. Default user "default", no
	// password.
	Username, Password string
	// DialTimeout bounds connecting. Default 5 s.
	DialTimeout time.Duration
	// ReadTimeout bounds each wait for the server, including the ack of an
	// INSERT. Default 60 s.
	ReadTimeout time.Duration
	// MaxOpenConns caps connections, so concurrent Writes beyond it wait for
	// one. Default 4.
	MaxOpenConns int
	// Compression of the wire protocol: "lz4", "zstd", "none", or "auto":
	// none to a loopback address (compressing costs CPU on both sides and
	// saves nothing there: about 8% of resolverd's CPU at full speed went
	// to LZ4), lz4 to any other. Default "auto".
	Compression string
	// TLS, when set, encrypts the connection. Default nil (plain TCP).
	TLS *tls.Config
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		Addr:         []string{"127.0.0.1:9000"},
		Database:     DefaultDatabase,
		Username:     "default",
		DialTimeout:  5 * time.Second,
		ReadTimeout:  60 * time.Second,
		MaxOpenConns: 4,
		Compression:  "auto",
	}
}

// withDefaults fills zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if len(c.Addr) == 0 {
		c.Addr = d.Addr
	}
	if c.Database == "" {
		c.Database = d.Database
	}
	if c.Username == "" {
		c.Username = d.Username
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = d.DialTimeout
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = d.ReadTimeout
	}
	if c.MaxOpenConns == 0 {
		c.MaxOpenConns = d.MaxOpenConns
	}
	if c.Compression == "" {
		c.Compression = d.Compression
	}
	return c
}

// Validate reports the first invalid field of c (after defaults are applied).
func (c Config) Validate() error {
	c = c.withDefaults()
	for _, a := range c.Addr {
		if a == "" {
			return errors.New("sink: config: empty address")
		}
	}
	if err := validDatabase(c.Database); err != nil {
		return fmt.Errorf("sink: config: %w", err)
	}
	if c.DialTimeout < 0 || c.ReadTimeout < 0 {
		return errors.New("sink: config: negative timeout")
	}
	if c.MaxOpenConns < 0 {
		return errors.New("sink: config: negative MaxOpenConns")
	}
	switch c.Compression {
	case "auto", "lz4", "zstd", "none":
	default:
		return fmt.Errorf("sink: config: compression %q is not auto, lz4, zstd or none", c.Compression)
	}
	return nil
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validDatabase accepts plain identifiers only, so the name can be spliced
// into DDL (which takes no query parameters) without escaping.
func validDatabase(db string) error {
	if !identifier.MatchString(db) || len(db) > 128 {
		return fmt.Errorf("database name %q is not an identifier ([A-Za-z_][A-Za-z0-9_]*)", db)
	}
	return nil
}

// Option configures NewClickHouse.
type Option func(*options)

type options struct {
	log     *slog.Logger
	reg     prometheus.Registerer
	migrate bool
	cluster *Cluster // WithCluster
}

// WithLogger logs through l. Default nil: no logging.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithRegisterer registers the writer's metrics on r. Default nil: no
// metrics. Writers of the same kind on one registerer share their metrics.
func WithRegisterer(r prometheus.Registerer) Option { return func(o *options) { o.reg = r } }

// WithMigrate makes NewClickHouse apply the schema migrations (Migrate)
// before checking the table. Default off: the table must exist.
func WithMigrate() Option { return func(o *options) { o.migrate = true } }

func buildOptions(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	return o
}

// compression is the wire compression to use to reach addr: Compression,
// with "auto" resolved (none on loopback, lz4 elsewhere).
func (c Config) compression(addr string) string {
	if c.Compression != "auto" {
		return c.Compression
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return "none"
	}
	return "lz4"
}
