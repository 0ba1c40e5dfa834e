package sink

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/toolaudit/toolaudit/sink/appender"
)

func TestKind(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := []struct {
		name      string
		err       error
		kind      string
		retryable bool
		permanent bool
	}{
		{"nil", nil, "", false, false},
		{"connection refused", fmt.Errorf("send: %w", refused), KindNetwork, true, false},
		{"bare ECONNREFUSED", syscall.ECONNREFUSED, KindNetwork, true, false},
		{"EOF", fmt.Errorf("read: %w", io.EOF), KindNetwork, true, false},
		{"conn closed", clickhouse.ErrConnectionClosed, KindNetwork, true, false},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), KindTimeout, true, false},
		{"io deadline", os.ErrDeadlineExceeded, KindTimeout, true, false},
		{"too many parts", &clickhouse.Exception{Code: 252, Message: "Too many parts"}, KindOverload, true, false},
		{"memory", fmt.Errorf("send: %w", &clickhouse.Exception{Code: 241}), KindOverload, true, false},
		{"server overloaded", &clickhouse.Exception{Code: 745}, KindOverload, true, false},
		{"server timeout", &clickhouse.Exception{Code: 159}, KindTimeout, true, false},
		{"unknown exception", &clickhouse.Exception{Code: 1002}, KindServer, true, false},
		{"unknown error", errors.New("something odd"), KindServer, true, false},
		{"auth", &clickhouse.Exception{Code: 516}, KindAuth, true, false},
		{"certificate required", fmt.Errorf("read: %w", &net.OpError{Op: "remote error", Err: errors.New("tls: certificate required")}), KindTLS, true, false},
		{"not TLS", fmt.Errorf("dial: %w", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), KindTLS, true, false},
		{"acquire timeout", clickhouse.ErrAcquireConnTimeout, KindOverload, true, false},
		{"no such column", &clickhouse.Exception{Code: 16}, KindSchema, false, true},
		{"unknown table", &clickhouse.Exception{Code: 60}, KindSchema, false, true},
		{"cannot parse", &clickhouse.Exception{Code: 6}, KindData, false, true},
		{"schema mismatch", fmt.Errorf("x: %w", ErrSchemaMismatch), KindSchema, false, true},
		{"permanent wrapper", fmt.Errorf("x: %w", NewPermanent(errors.New("bad row"))), KindData, false, true},
		{"permanent wins over network", NewPermanent(fmt.Errorf("%w", io.EOF)), KindData, false, true},
		{"canceled", fmt.Errorf("x: %w: %w", context.Canceled, io.EOF), KindCanceled, false, false},
		{"closed", ErrClosed, KindClosed, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Kind(tt.err); got != tt.kind {
				t.Errorf("Kind = %q, want %q", got, tt.kind)
			}
			if got := IsRetryable(tt.err); got != tt.retryable {
				t.Errorf("IsRetryable = %v, want %v", got, tt.retryable)
			}
			// What the writes return: marked for appender.IsPermanent,
			// of the same Kind.
			marked := markPermanent(tt.err)
			if got := appender.IsPermanent(marked); got != tt.permanent {
				t.Errorf("IsPermanent = %v, want %v", got, tt.permanent)
			}
			if got := Kind(marked); got != tt.kind || !errors.Is(marked, tt.err) {
				t.Errorf("marked: Kind = %q, want %q; lost the cause: %v", got, tt.kind, !errors.Is(marked, tt.err))
			}
		})
	}
	if NewPermanent(nil) != nil {
		t.Error("NewPermanent(nil) != nil")
	}
}

func TestCompressionAuto(t *testing.T) {
	for _, tc := range []struct{ setting, addr, want string }{
		{"auto", "127.0.0.1:9000", "none"},
		{"auto", "[::1]:9000", "none"},
		{"auto", "localhost:9000", "none"},
		{"auto", "127.8.9.1:9000", "none"},
		{"auto", "10.0.0.5:9000", "lz4"},
		{"auto", "clickhouse.internal:9440", "lz4"},
		{"lz4", "127.0.0.1:9000", "lz4"},
		{"none", "10.0.0.5:9000", "none"},
		{"zstd", "localhost:9000", "zstd"},
	} {
		if got := (Config{Compression: tc.setting}).compression(tc.addr); got != tc.want {
			t.Errorf("compression %s to %s = %s, want %s", tc.setting, tc.addr, got, tc.want)
		}
	}
	if err := (Config{Compression: "gzip"}).withDefaults().Validate(); err == nil {
		t.Error("compression gzip accepted")
	}
}
