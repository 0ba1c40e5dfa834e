// Command fleetgen writes the listing events of a generated fleet (package
// internal/testkit/fleet) as JSONL, or produces them to Kafka at a steady rate:
// host sessions relisting real manifests, a few changing a definition. It
// is the input of the registry measurements (scripts/bench-registry.sh).
//
//	go run ./scripts/fleetgen -sessions 20000 > fleet.jsonl
//	go run ./scripts/fleetgen -sessions 6667 -brokers 127.0.0.1:19092 -rate 1000
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/internal/testkit/fleet"
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
	topic := flag.String("topic", "tool-listings", "listings topic (with -brokers)")
	rate := flag.Int("rate", 1000, "listings per second (with -brokers)")
	flag.Parse()
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
