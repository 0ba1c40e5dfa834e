// Package topic is the one loader of the listings topic: it reads the
// topic whole, to its end as listed when it is called, and applies every
// listing to a registry store (or any registry.Applier) in event time, whatever
// the order. The re-analysis builds the history it decides against with
// it, and the registry commands (pending, pin, lock) the catalogue they
// review; the pipeline reads the topic as a live consumer (package
// stream), from a checkpoint or the start.
package topic

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/internal/topicrange"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/schema"
)

// Stats counts what LoadListings read.
type Stats struct {
	// Records read; Applied, the listings among them that decoded; Bad,
	// those that did not (each logged and skipped, as the pipeline
	// does); Issues, what applying them reported (the first maxLogged
	// logged).
	Records, Applied, Bad, Issues int
}

// maxLogged is how many listing issues are logged one by one.
const maxLogged = 20

// LoadListings reads the listings topic whole into a. A topic that does
// not exist is an error (topicrange.ErrNoTopic): an empty registry would
// decide every call as naming nothing.
func LoadListings(ctx context.Context, opts []kgo.Opt, topic string, a registry.Applier, log *slog.Logger) (Stats, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var st Stats
	err := topicrange.ReadAll(ctx, opts, topic, log, func(_ int32, recs []*kgo.Record) error {
		batch := schema.DecodeListings(len(recs), func(i int) []byte { return recs[i].Value }, func(i int, err error) {
			st.Bad++
			log.Warn("bad listing skipped", "partition", recs[i].Partition, "offset", recs[i].Offset, "err", err)
		})
		for _, is := range a.Apply(batch...) {
			if st.Issues++; st.Issues <= maxLogged {
				log.Warn("listing issue", "issue", is.String())
			}
		}
		st.Records += len(recs)
		st.Applied += len(batch)
		return nil
	})
	if st.Issues > maxLogged {
		log.Warn("more listing issues not logged", "count", st.Issues-maxLogged)
	}
	return st, err
}
