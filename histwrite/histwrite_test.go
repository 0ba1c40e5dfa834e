package histwrite_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toolaudit/toolaudit/histwrite"
	"github.com/toolaudit/toolaudit/sink/appender"
)

var names = histwrite.Names{Subsystem: "test_history", Noun: "rows", Log: "test history", Rows: "rows", Store: "table",
	WrittenHelp: "Written.", DroppedHelp: "Dropped.", WriteErrorsHelp: "Failed writes."}

// TestWrite: a batch whose writes fail is retried until it is stored; one
// the table refuses for good is dropped; each counted and logged under
// the Names given; the end of ctx is the only error.
func TestWrite(t *testing.T) {
	refused := appender.Permanent(errors.New("no such column"))
	for _, tc := range []struct {
		name      string
		errs      []error // the writes' errors, in turn; then nil
		cancel    bool
		stored    bool
		wantErr   error
		written   float64
		dropped   float64
		writeErrs float64
		logged    []string
		notLogged string
	}{
		{name: "stored", stored: true, written: 3},
		{name: "retried", errs: []error{errors.New("down"), errors.New("down")}, stored: true, written: 3, writeErrs: 2,
			logged: []string{`level=WARN msg="test history: write failed, retrying" rows=3`}},
		{name: "refused", errs: []error{errors.New("down"), refused}, dropped: 3, writeErrs: 2,
			logged: []string{`level=ERROR msg="test history: rows the table cannot take, dropped" rows=3`}},
		{name: "cancelled", errs: []error{context.Canceled}, cancel: true, wantErr: context.Canceled, notLogged: "level="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			reg := prometheus.NewRegistry()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errs := tc.errs
			w, err := histwrite.New(names, func(_ context.Context, rows []string) error {
				if tc.cancel {
					cancel()
				}
				if len(errs) == 0 {
					return nil
				}
				err := errs[0]
				errs = errs[1:]
				return err
			}, histwrite.Options{RetryMin: time.Millisecond, RetryMax: time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(&log, nil)), Registerer: reg})
			if err != nil {
				t.Fatal(err)
			}
			stored, err := w.Write(ctx, []string{"a", "b", "c"})
			if stored != tc.stored || !errors.Is(err, tc.wantErr) || tc.wantErr == nil && err != nil {
				t.Fatalf("Write = %v, %v; want %v, %v", stored, err, tc.stored, tc.wantErr)
			}
			for _, m := range []struct {
				c    prometheus.Counter
				want float64
			}{{w.Written, tc.written}, {w.Dropped, tc.dropped}, {w.WriteErrors, tc.writeErrs}} {
				if got := testutil.ToFloat64(m.c); got != m.want {
					t.Errorf("%s = %v, want %v", m.c.Desc(), got, m.want)
				}
			}
			for _, l := range tc.logged {
				if !strings.Contains(log.String(), l) {
					t.Errorf("log lacks %s:\n%s", l, log.String())
				}
			}
			if tc.notLogged != "" && strings.Contains(log.String(), tc.notLogged) {
				t.Errorf("logged:\n%s", log.String())
			}
		})
	}
}

// TestNewRegisters: New registers its counters, named from Subsystem and
// Noun, and the recorder's collectors, and fails on a name registered twice.
func TestNewRegisters(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "toolaudit_test_history_version", Help: "Version."})
	write := func(context.Context, []int) error { return nil }
	if _, err := histwrite.New(names, write, histwrite.Options{Registerer: reg}, g); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "toolaudit_test_history_rows_written_total", "toolaudit_test_history_rows_dropped_total",
		"toolaudit_test_history_write_errors_total", "toolaudit_test_history_version"); err != nil || n != 4 {
		t.Fatalf("%d of the 4 metrics gathered (%v)", n, err)
	}
	if _, err := histwrite.New(names, write, histwrite.Options{Registerer: reg}); err == nil {
		t.Fatal("a second Writer of the same names registered")
	}
}
