// Command fleetgen writes the listing events of a generated fleet (package
// internal/fleet) as JSONL: host sessions relisting real manifests, a few
// changing a definition. It is the input of the registry measurements in
// docs/notes/registry.md.
//
//	go run ./scripts/fleetgen -manifests testdata/corpus/mcp/listings.jsonl -sessions 20000 > fleet.jsonl
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"

	"github.com/toolaudit/toolaudit/internal/fleet"
)

func main() {
	manifests := flag.String("manifests", "testdata/corpus/mcp/listings.jsonl", "listing events whose servers the fleet relists")
	sessions := flag.Int("sessions", 20000, "host sessions (each lists -servers servers)")
	servers := flag.Int("servers", 3, "servers per session")
	change := flag.Float64("change", 0.01, "share of listings that change a definition")
	seed := flag.Uint64("seed", 1, "seed")
	registry := flag.String("registry", "fleet", "registry")
	prefix := flag.String("id-prefix", "f-", "event id prefix")
	flag.Parse()
	data, err := os.ReadFile(*manifests)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ms, err := fleet.Manifests(data)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	for _, e := range fleet.Generate(fleet.Config{Registry: *registry, Sessions: *sessions, ServersPerSession: *servers, ChangeRate: *change, Seed: *seed, IDPrefix: *prefix}, ms) {
		w.Write(e.Line)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
