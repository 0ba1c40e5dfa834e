package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/toolaudit/toolaudit/embedded"
)

// The embedded stack's addresses at its default ports (resolverd stack,
// run --embedded, make demo).
var (
	embeddedClickHouse = net.JoinHostPort("127.0.0.1", strconv.Itoa(embedded.DefaultClickHouseTCP))
	embeddedKafka      = net.JoinHostPort("127.0.0.1", strconv.Itoa(embedded.DefaultKafkaPort))
)

// stackDefault returns addrs, the addresses of flag name, unless the flag
// was not given (on the command line or in the environment) and nothing
// answers at its default while the embedded stack does at stack: then the
// stack's address, said in the log. A new user of `make demo` or
// `resolverd stack` so needs no flag; when neither answers, the error says
// what to pass instead of a connection error.
func stackDefault(ctx context.Context, fs *flag.FlagSet, name string, addrs []string, stack string, log *slog.Logger) ([]string, error) {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	if given || len(addrs) != 1 || answers(ctx, addrs[0]) {
		return addrs, nil
	}
	if answers(ctx, stack) {
		log.Info("nothing answers at the default --"+name+": using the embedded stack's (resolverd stack, make demo); pass --"+name+" to choose",
			"default", addrs[0], "using", stack)
		return []string{stack}, nil
	}
	return nil, fmt.Errorf("nothing answers at %s (the default --%s) nor at %s (the embedded stack's: resolverd stack, make demo): start one, or pass --%s HOST:PORT",
		addrs[0], name, stack, name)
}

// answers reports whether a TCP connection to addr opens within a second.
func answers(ctx context.Context, addr string) bool {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
