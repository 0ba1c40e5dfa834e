package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"github.com/toolaudit/toolaudit/embedded"
)

// portFlags are the loopback ports of the embedded stack: `stack` names
// them --kafka-port etc., `run` --embedded-kafka-port etc. (beside
// --brokers and --clickhouse, which name external services).
type portFlags struct {
	prefix               string
	kafka, chTCP, chHTTP int
}

func (p *portFlags) register(fs *flag.FlagSet, prefix string) {
	p.prefix = prefix
	fs.IntVar(&p.kafka, prefix+"kafka-port", embedded.DefaultKafkaPort, "`port` of the embedded Kafka broker on 127.0.0.1 (0: a free one)")
	fs.IntVar(&p.chTCP, prefix+"clickhouse-port", embedded.DefaultClickHouseTCP, "native protocol `port` of the embedded ClickHouse on 127.0.0.1 (0: a free one)")
	fs.IntVar(&p.chHTTP, prefix+"clickhouse-http-port", embedded.DefaultClickHouseHTTP, "HTTP `port` of the embedded ClickHouse on 127.0.0.1 (0: a free one)")
}

func (p *portFlags) validate() error {
	for _, v := range []int{p.kafka, p.chTCP, p.chHTTP} {
		if v < 0 || v > 65535 {
			return usageError{fmt.Errorf("port %d: want 0 (a free one) to 65535", v)}
		}
	}
	return nil
}

// options maps the flags onto embedded.Options, where 0 means the default
// port and -1 a free one.
func (p *portFlags) options(dir string, log *slog.Logger) embedded.Options {
	free := func(v int) int {
		if v == 0 {
			return -1
		}
		return v
	}
	return embedded.Options{Dir: dir, Logger: log, KafkaPort: free(p.kafka), ClickHouseTCP: free(p.chTCP), ClickHouseHTTP: free(p.chHTTP)}
}

// check fails, naming the flag, when a fixed port is already taken:
// the embedded engine's readiness probe would otherwise be answered by
// whichever ClickHouse holds the port, and the decisions written there.
// Another process can still take a port between check and start; then
// the start fails with the bind error.
func (p *portFlags) check() error {
	for _, f := range []struct {
		name string
		port int
	}{{"kafka-port", p.kafka}, {"clickhouse-port", p.chTCP}, {"clickhouse-http-port", p.chHTTP}} {
		if f.port == 0 {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(f.port)))
		if err != nil {
			return fmt.Errorf("--%s%s %d: %w (choose another port, or 0 for a free one)", p.prefix, f.name, f.port, err)
		}
		ln.Close()
	}
	return nil
}
