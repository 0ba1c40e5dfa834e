package reanalyze

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
)

// Config configures a [Runner]. Start from [DefaultConfig]; the zero value
// is not valid.
type Config struct {
	// Window is the calls to decide: those of Window.Topic whose window
	// time (schema.WindowTime) is in [From, To). From and To must be whole
	// milliseconds, the precision of the store (and of Kafka's
	// timestamps), so that the archive and Kafka select the same calls.
	Window schema.Window

	// AnalysisID stamps every row, beside the live analysis's. Required.
	AnalysisID string
	// ResolverBuild and PolicyVersion stamp every row; PolicyVersion
	// defaults to the resolver's mode.
	ResolverBuild, PolicyVersion string
	// Resolver decides the calls. The zero value is strict.
	Resolver resolve.Resolver
	// KeepRawArgs stores the emitted arguments in every row (they may
	// hold secrets: off, rows keep their shape and hash).
	KeepRawArgs bool
	// ArgsKey keys args_hash as the live pipeline's (resolverd run
	// --args-hash-key-file): give the same key, or the re-analysed rows'
	// args_hash differs from the live ones'. Nil: plain SHA-256.
	ArgsKey *schema.ArgsKey
	// Suggester fills suggested_tool of H1 and M1 rows, as live. Nil: the
	// runner makes its own (suggest.New).
	Suggester resolve.ToolSuggester

	// Workers decide the calls, each on its own goroutine. Default
	// runtime.GOMAXPROCS(0): the calls of a window are independent once
	// the registry history is loaded.
	Workers int
	// BatchRows and BatchBytes bound one write (Batch.Len, Batch.Size);
	// two batches are held at most, one filling while the other is
	// written. Defaults 100000 and 64 MiB, as the pipeline's.
	BatchRows, BatchBytes int
	// RetryMin and RetryMax bound the exponential backoff between attempts
	// to write a batch; RetryFor is how long a batch is retried before
	// the run fails. Defaults 100ms, 5s and 2m. An error that retrying
	// cannot fix (appender.IsPermanent) fails the run at once.
	RetryMin, RetryMax, RetryFor time.Duration
}

// DefaultConfig returns the defaults, without window or analysis.
func DefaultConfig() Config {
	return Config{
		Window:     schema.Window{Topic: schema.TopicCalls},
		Workers:    runtime.GOMAXPROCS(0),
		BatchRows:  100000,
		BatchBytes: 64 << 20,
		RetryMin:   100 * time.Millisecond,
		RetryMax:   5 * time.Second,
		RetryFor:   2 * time.Minute,
	}
}

// ErrConfig wraps what Config.Validate reports.
var ErrConfig = errors.New("reanalyze config")

// Validate reports every missing or invalid field.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	w := c.Window
	switch {
	case w.Topic == "":
		bad("no topic")
	case w.From.IsZero() || w.To.IsZero():
		bad("the window needs a start and an end")
	case !w.From.Before(w.To):
		bad("the window ends (%s) before it starts (%s)", w.To.UTC().Format(time.RFC3339Nano), w.From.UTC().Format(time.RFC3339Nano))
	}
	for _, t := range []time.Time{w.From, w.To} {
		if !t.Equal(t.Truncate(time.Millisecond)) {
			bad("window bound %s is not a whole millisecond", t.UTC().Format(time.RFC3339Nano))
		}
	}
	if c.AnalysisID == "" {
		bad("empty analysis id")
	}
	if c.Resolver.Mode != resolve.Strict && c.Resolver.Mode != resolve.PinAssisted {
		bad("unknown resolver mode %d", c.Resolver.Mode)
	}
	if c.Workers <= 0 {
		bad("workers %d, want > 0", c.Workers)
	}
	if c.BatchRows <= 0 || c.BatchBytes <= 0 {
		bad("batch of %d rows, %d bytes: want > 0", c.BatchRows, c.BatchBytes)
	}
	if c.RetryMin <= 0 || c.RetryMax < c.RetryMin || c.RetryFor < 0 {
		bad("retry backoff %v..%v for %v, want 0 < min <= max, for >= 0", c.RetryMin, c.RetryMax, c.RetryFor)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

// policyVersion is the PolicyVersion stamped on rows.
func (c Config) policyVersion() string {
	if c.PolicyVersion != "" {
		return c.PolicyVersion
	}
	return c.Resolver.Policy()
}
