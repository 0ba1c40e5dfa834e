package reanalyze

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/schema"
)

// ListingStats counts what LoadListings read.
type ListingStats struct {
	Records, Applied, Bad, Issues int
}

// LoadListings reads the listings topic whole, every partition from its
// start to its end as listed when it is called, and applies every listing
// to store (in event time, whatever the order: registry): the
// registry history that a re-analysis decides against, as complete as the
// topic holds it, late listings included. A listing that does not decode
// is logged and skipped, as the pipeline does.
//
// It is the re-analysis's one reader of the history, through the public
// API of the store and the topic; it changes with the way the pipeline
// starts (a checkpoint of the store, then the topic's tail).
func LoadListings(ctx context.Context, opts []kgo.Opt, topic string, store *registry.Store, log *slog.Logger) (ListingStats, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var st ListingStats
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return st, fmt.Errorf("kafka: %w", err)
	}
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	var ends kadm.ListedOffsets
	if err == nil {
		ends, err = adm.ListEndOffsets(ctx, topic)
	}
	if err == nil {
		err = ends.Error()
	}
	cl.Close()
	if err != nil {
		return st, fmt.Errorf("kafka: list the offsets of %s: %w", topic, err)
	}
	if _, ok := ends[topic]; !ok {
		return st, fmt.Errorf("kafka: listings topic %s does not exist", topic)
	}
	ranges := map[int32]offsets{}
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(topic, o.Partition)
		ranges[o.Partition] = offsets{s.Offset, o.Offset}
	})
	const maxLogged = 20
	err = readRanges(ctx, opts, topic, ranges, log, func(_ int32, recs []*kgo.Record) (bool, error) {
		batch := schema.DecodeListings(len(recs), func(i int) []byte { return recs[i].Value }, func(i int, err error) {
			st.Bad++
			log.Warn("bad listing skipped", "partition", recs[i].Partition, "offset", recs[i].Offset, "err", err)
		})
		for _, is := range store.Apply(batch...) {
			if st.Issues++; st.Issues <= maxLogged {
				log.Warn("listing issue", "issue", is.String())
			}
		}
		st.Records += len(recs)
		st.Applied += len(batch)
		return false, nil
	})
	if st.Issues > maxLogged {
		log.Warn("more listing issues not logged", "count", st.Issues-maxLogged)
	}
	return st, err
}
