// Command fleetgen writes the listing events of a generated fleet (package
// internal/testkit/fleet) as JSONL, or produces them to Kafka at a steady rate:
// host sessions relisting real manifests, a few changing a definition. It
// is the input of the registry measurements (scripts/bench-registry.sh).
//
//	go run ./cmd/fleetgen -sessions 20000 > fleet.jsonl
//	go run ./cmd/fleetgen -sessions 6667 -brokers 127.0.0.1:19092 -rate 1000
//
// With -demo DIR it writes instead the demo's fleet (make demo): htb's
// single-registry and MCP tracks (-trials, -honest) regrouped into agent
// sessions of tens of calls (fleet.Sessions), two of them with an
// incident (a rug pull mid-session, a model inventing a name again and
// again), as DIR/listings.jsonl and DIR/calls.jsonl.
//
//	go run ./cmd/fleetgen -demo .demo/fleet -start 2026-12-01T00:00:00Z
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/internal/testkit/demofleet"
	"github.com/toolaudit/toolaudit/internal/testkit/fleet"
	"github.com/toolaudit/toolaudit/schema"
)

func main() {
	manifests := flag.String("manifests", "testdata/corpus/mcp/listings.jsonl", "listing events whose servers the fleet relists")
	sessions := flag.Int("sessions", 20000, "host sessions (each lists -servers servers)")
	servers := flag.Int("servers", 3, "servers per session")
	change := flag.Float64("change", 0.01, "share of listings that change a definition")
	seed := flag.Uint64("seed", 1, "seed")
	registry := flag.String("registry", "fleet", "registry")
	prefix := flag.String("id-prefix", "f-", "event id prefix")
	brokers := flag.String("brokers", "", "produce to this Kafka instead of writing JSONL")
	topic := flag.String("topic", schema.TopicListings, "listings topic (with -brokers)")
	rate := flag.Int("rate", 1000, "listings per second (with -brokers)")
	demo := flag.String("demo", "", "write the demo's fleet of agent sessions into this directory instead")
	start := flag.String("start", "2026-12-01T00:00:00Z", "the demo fleet's first call (with -demo)")
	trials := flag.Int("trials", 40, "htb hostile trials per class (with -demo)")
	honest := flag.Int("honest", 800, "htb honest trials per kind (with -demo)")
	flag.Parse()
	if *demo != "" {
		if err := writeDemo(*demo, *start, *seed, *trials, *honest); err != nil {
			fmt.Fprintln(os.Stderr, "fleetgen:", err)
			os.Exit(1)
		}
		return
	}
	ms, err := fleet.ReadManifests(*manifests)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	evs := fleet.Generate(fleet.Config{Registry: *registry, Sessions: *sessions, ServersPerSession: *servers, ChangeRate: *change, Seed: *seed, IDPrefix: *prefix}, ms)
	if *brokers != "" {
		if err := feed(*brokers, *topic, *registry, *rate, evs); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	for _, e := range evs {
		w.Write(e.Line)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// feed produces the events, keyed registry/server, at rate per second, and
// prints when it started and ended (Unix seconds, for the bench script).
func feed(brokers, topic, registry string, rate int, evs []fleet.Event) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(10000))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx := context.Background()
	start := time.Now()
	fmt.Printf("feed_start %.3f\n", float64(start.UnixNano())/1e9)
	errs := make(chan error, 1)
	for i, e := range evs {
		if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); d > 0 {
			time.Sleep(d)
		}
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(registry + "/" + e.Server), Value: e.Line, Timestamp: e.ObservedAt}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	fmt.Printf("feed_end %.3f\n", float64(time.Now().UnixNano())/1e9)
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// writeDemo writes the demo's fleet: htb's tracks regrouped into
// sessions, and says which sessions carry an incident.
func writeDemo(dir, start string, seed uint64, trials, honest int) error {
	at, err := time.Parse(time.RFC3339, start)
	if err != nil {
		return fmt.Errorf("-start: %w", err)
	}
	listings, out, rp, err := demofleet.Demo(at, seed, trials, honest)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	lines := make([][]byte, len(out))
	for i, c := range out {
		lines[i] = c.Line
	}
	for name, ls := range map[string][][]byte{"listings.jsonl": listings, "calls.jsonl": lines} {
		if err := writeLines(filepath.Join(dir, name), ls); err != nil {
			return err
		}
	}
	fmt.Printf("%d calls; incidents: session %s (server %s of %s changes %s at %s), session %s (a model inventing a name)\n",
		len(out), fleet.RugPullSession, rp.Server, rp.Registry, rp.Tool, rp.At.Format(time.RFC3339), fleet.InventingSession)
	return nil
}

func writeLines(path string, lines [][]byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, l := range lines {
		w.Write(l)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
