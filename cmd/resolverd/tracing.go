package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// traceFlags export the call path's spans (package callpath, one per
// decision) with OTLP.
type traceFlags struct {
	endpoint, service string
}

func (f *traceFlags) register(fs *flag.FlagSet, service string) {
	fs.StringVar(&f.endpoint, "trace-otlp", "", "export a span per decision of the call path, in the caller's trace (traceparent; MCP _meta), with OTLP/HTTP protobuf to `URL`, e.g. http://127.0.0.1:4318/v1/traces (empty: no spans); a caller's sampled flag is kept")
	fs.StringVar(&f.service, "trace-service", service, "service.name of the spans")
}

// tracer returns the call path's tracer and a shutdown that flushes what
// is buffered; a nil tracer when off.
func (f *traceFlags) tracer(ctx context.Context, log *slog.Logger) (trace.Tracer, func(), error) {
	if f.endpoint == "" {
		return nil, func() {}, nil
	}
	u, err := url.Parse(f.endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, nil, usageError{fmt.Errorf("--trace-otlp %q: want an http:// or https:// URL", f.endpoint)}
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(f.endpoint))
	if err != nil {
		return nil, nil, fmt.Errorf("--trace-otlp: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", f.service))))
	log.Info("call path spans exported", "endpoint", f.endpoint, "service", f.service)
	return tp.Tracer("github.com/toolaudit/toolaudit/callpath"), func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			log.Warn("call path spans not all exported", "err", err)
		}
	}, nil
}
