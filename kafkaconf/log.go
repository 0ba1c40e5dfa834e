package kafkaconf

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Logger passes a franz-go client's warnings and errors to l, and
// everything it logs (group joins, assignments, commits) when l is at
// debug level: kgo.WithLogger(kafkaconf.Logger(l)).
func Logger(l *slog.Logger) kgo.Logger { return kgoLogger{l} }

type kgoLogger struct{ l *slog.Logger }

func (k kgoLogger) Level() kgo.LogLevel {
	if k.l.Enabled(context.Background(), slog.LevelDebug) {
		return kgo.LogLevelDebug
	}
	return kgo.LogLevelWarn
}

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	var l slog.Level
	switch level {
	case kgo.LogLevelError:
		l = slog.LevelError
	case kgo.LogLevelWarn:
		l = slog.LevelWarn
	case kgo.LogLevelInfo:
		l = slog.LevelInfo
	default:
		l = slog.LevelDebug
	}
	k.l.Log(context.Background(), l, "kafka: "+msg, keyvals...)
}
