package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/toolaudit/toolaudit/sink"
)

// printTOCTOU prints the calls whose enforcement-time and stream-time
// decisions differ (report --toctou).
func printTOCTOU(ctx context.Context, std stdio, c *sink.ClickHouse, analysis string, limit int) error {
	gaps, err := c.TOCTOU(ctx, analysis, limit)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(std.out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "enforced at\tcall\tsession\ttool\tsource\taction\tenforced\tversion\tstream\tversion\n")
	for _, g := range gaps {
		action := string(g.Action)
		if action == "" {
			action = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.EnforcedAt.Format(time.RFC3339Nano), g.CallKey, g.SessionID, g.Tool,
			g.EnforcementSource, action, g.EnforcementClass, g.EnforcementVersion, g.StreamClass, g.StreamVersion)
	}
	tw.Flush()
	fmt.Fprintf(std.out, "%d call(s) decided differently in the call path and from the stream (analysis %q, FINAL, at most %d)\n", len(gaps), analysis, limit)
	return nil
}
