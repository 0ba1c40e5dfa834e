package kafkaconf

import (
	"flag"
	"strings"
)

// DefaultBrokers is the seed a command that reaches Kafka by default
// asks: a broker on this machine.
const DefaultBrokers = "127.0.0.1:9092"

// Brokers is the --brokers flag, declared here once for every command
// that reaches Kafka (resolverd run, gateway, reanalyze, registry;
// ingest): Kafka's seed addresses, comma-separated.
type Brokers struct{ list string }

// Register adds --brokers to fs with default def ("" for none); note, when
// not empty, says what this command does with it beyond the common text.
func (b *Brokers) Register(fs *flag.FlagSet, def, note string) {
	help := "Kafka seed `BROKERS` (host:port), comma-separated"
	if note != "" {
		help += " (" + note + ")"
	}
	fs.StringVar(&b.list, "brokers", def, help)
}

// String is the flag's value as given.
func (b Brokers) String() string { return b.list }

// List is the seed addresses, blanks trimmed and empty ones left out:
// none for an empty flag.
func (b Brokers) List() []string { return splitList(b.list) }

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
