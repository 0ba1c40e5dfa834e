package sink

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/ClickHouse/ch-go"
	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"

	"github.com/toolaudit/toolaudit/sink/appender"
)

// Sentinel errors.
var (
	// ErrClosed is returned by Write after Close. It is neither permanent
	// nor retryable: the writer is gone, the rows were not written.
	ErrClosed = errors.New("sink: writer closed")
	// ErrSchemaMismatch means the table does not have the columns and types
	// the writer needs (migrations not applied, or applied by a newer or
	// older build). Permanent.
	ErrSchemaMismatch = errors.New("sink: schema mismatch")
	// ErrChecksumMismatch means a migration that was applied has changed
	// since: Migrate refuses to go on.
	ErrChecksumMismatch = errors.New("sink: applied migration changed")
)

// Permanent marks an error that retrying cannot fix: the batch is bad for
// this store (schema mismatch, bad data). It is permanent in the sense of
// package appender (errors.Is(err, appender.ErrPermanent)), which is how
// callers ask: the writes mark every error that Kind finds permanent.
type Permanent struct {
	Err  error
	Kind string // what kind of failure, as in the errors_total metric
}

// NewPermanent wraps err as permanent (nil stays nil).
func NewPermanent(err error) error {
	if err == nil {
		return nil
	}
	return &Permanent{Err: err, Kind: KindData}
}

func (e *Permanent) Error() string { return "permanent: " + e.Err.Error() }

func (e *Permanent) Unwrap() error { return e.Err }

// Is makes a *Permanent an appender.ErrPermanent.
func (e *Permanent) Is(target error) bool { return target == appender.ErrPermanent }

// The kinds of failure, the label values of metric
// toolaudit_sink_write_errors_total.
const (
	KindNetwork  = "network"  // connection refused/reset/closed, EOF: retryable
	KindTimeout  = "timeout"  // deadline, socket or server timeout: retryable
	KindOverload = "overload" // too many parts, memory, too many queries: retryable
	KindServer   = "server"   // other server exception, unknown error: retryable
	KindAuth     = "auth"     // authentication, access: retryable (see IsRetryable)
	KindTLS      = "tls"      // TLS handshake refused, certificate not verified: retryable (see IsRetryable)
	KindSchema   = "schema"   // table or columns missing or of another type: permanent
	KindData     = "data"     // the rows cannot be stored: permanent
	KindCanceled = "canceled" // the caller's context was canceled: neither
	KindClosed   = "closed"   // Write after Close: neither
)

// markPermanent returns err as a *Permanent when Kind finds it permanent (a
// ClickHouse exception about the schema or the data, a column that does
// not fit), so that callers of the writes need appender.IsPermanent alone.
func markPermanent(err error) error {
	switch k := Kind(err); {
	case k != KindSchema && k != KindData, appender.IsPermanent(err):
		return err
	default:
		return &Permanent{Kind: k, Err: err}
	}
}

// IsRetryable reports whether writing the same rows again may succeed:
// network errors, timeouts, server overload (TOO_MANY_PARTS, memory limits,
// too many simultaneous queries), connection refused, and every error not
// known to be permanent, because dead-lettering good decisions on an
// unrecognised transient error would drop them while retrying only delays.
// Authentication, access and TLS errors are retryable for the same reason:
// they are the deployment's fault, not the data's (a certificate that
// expires mid-run), and NewClickHouse has already refused to start with
// bad credentials or certificates. Canceled contexts and a closed
// writer are neither retryable nor permanent; nor is nil.
func IsRetryable(err error) bool {
	switch Kind(err) {
	case "", KindSchema, KindData, KindCanceled, KindClosed:
		return false
	}
	return true
}

// Kind classifies err as one of the Kind constants ("" for nil).
func Kind(err error) string {
	if err == nil {
		return ""
	}
	var p *Permanent
	if errors.As(err, &p) {
		if p.Kind == KindSchema {
			return KindSchema
		}
		return KindData
	}
	switch {
	case errors.Is(err, ErrClosed):
		return KindClosed
	case errors.Is(err, ErrSchemaMismatch):
		return KindSchema
	case errors.Is(err, context.Canceled):
		return KindCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return KindTimeout
	}
	var ex *clickhouse.Exception
	if errors.As(err, &ex) {
		return exceptionKind(ex.Code)
	}
	if ex, ok := ch.AsException(err); ok { // from an INSERT (ch-go)
		return exceptionKind(int32(ex.Code))
	}
	var conv *column.ColumnConverterError
	var colErr *column.Error
	if errors.As(err, &conv) || errors.As(err, &colErr) {
		return KindSchema // our Go types do not fit the table's columns
	}
	// Before the network errors: a TLS alert is a *net.OpError.
	var tr *tlsRefusal
	if errors.As(err, &tr) || tlsHint(err) != "" {
		return KindTLS
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return KindTimeout
	}
	if errors.As(err, &ne) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, clickhouse.ErrConnectionClosed) {
		return KindNetwork
	}
	if errors.Is(err, clickhouse.ErrAcquireConnTimeout) {
		return KindOverload // every pooled connection busy
	}
	return KindServer
}

// exceptionKind classifies a ClickHouse server exception by code (names as
// errorCodeToName on ClickHouse 26.7). Codes not listed are KindServer,
// retryable.
func exceptionKind(code int32) string {
	switch code {
	case 32, 33, 95, 96, 210, 279:
		// ATTEMPT_TO_READ_AFTER_EOF, CANNOT_READ_ALL_DATA, CANNOT_READ_FROM_SOCKET,
		// CANNOT_WRITE_TO_SOCKET, NETWORK_ERROR, ALL_CONNECTION_TRIES_FAILED
		return KindNetwork
	case 159, 209: // TIMEOUT_EXCEEDED, SOCKET_TIMEOUT
		return KindTimeout
	case 173, 202, 203, 241, 242, 243, 252, 364, 745, 749, 776, 777, 778,
		// CANNOT_ALLOCATE_MEMORY, TOO_MANY_SIMULTANEOUS_QUERIES, NO_FREE_CONNECTION,
		// MEMORY_LIMIT_EXCEEDED, TABLE_IS_READ_ONLY, NOT_ENOUGH_SPACE, TOO_MANY_PARTS,
		// RECEIVED_ERROR_TOO_MANY_REQUESTS, SERVER_OVERLOADED, TCP_CONNECTION_LIMIT_REACHED,
		// RESOURCE_LIMIT_EXCEEDED, MEMORY_RESERVATION_KILLED, MEMORY_RESERVATION_FAILED
		225, 244, 285, 999: // NO_ZOOKEEPER, UNEXPECTED_ZOOKEEPER_ERROR, TOO_FEW_LIVE_REPLICAS, KEEPER_EXCEPTION
		return KindOverload
	case 192, 193, 194, 497, 516: // UNKNOWN_USER, WRONG_PASSWORD, REQUIRED_PASSWORD, ACCESS_DENIED, AUTHENTICATION_FAILED
		return KindAuth
	case 8, 16, 44, 47, 53, 60, 62, 70, 81, 122:
		// THERE_IS_NO_COLUMN, NO_SUCH_COLUMN_IN_TABLE, ILLEGAL_COLUMN, UNKNOWN_IDENTIFIER,
		// TYPE_MISMATCH, UNKNOWN_TABLE, SYNTAX_ERROR, CANNOT_CONVERT_TYPE, UNKNOWN_DATABASE,
		// INCOMPATIBLE_COLUMNS
		return KindSchema
	case 6, 26, 27, 38, 41, 69, 72, 117, 190:
		// CANNOT_PARSE_TEXT, CANNOT_PARSE_QUOTED_STRING, CANNOT_PARSE_INPUT_ASSERTION_FAILED,
		// CANNOT_PARSE_DATE, CANNOT_PARSE_DATETIME, ARGUMENT_OUT_OF_BOUND, CANNOT_PARSE_NUMBER,
		// INCORRECT_DATA, SIZES_OF_ARRAYS_DONT_MATCH
		return KindData
	}
	return KindServer // incl. UNKNOWN_STATUS_OF_INSERT, ABORTED, QUERY_WAS_CANCELLED
}
