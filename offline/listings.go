package offline

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/toolaudit/toolaudit/internal/par"
	"github.com/toolaudit/toolaudit/registryversions"
	"github.com/toolaudit/toolaudit/schema"
)

// LoadStats counts what LoadListings read.
type LoadStats struct {
	Lines, Applied, Bad, Issues int
}

// loadBatchBytes is about how much listing JSON is decoded and applied at
// a time: large enough to spread decoding over every core, small enough
// that memory does not follow the input (a fleet's file of relistings is
// gigabytes; the store keeps only what is new).
const loadBatchBytes = 8 << 20

// LoadListings reads JSONL listing events from r and applies them to the
// store, a batch at a time (the store applies them in event time whatever
// the order, so batching changes nothing but memory). A bad line is logged
// with its line number and skipped; an unreadable input is an error.
func LoadListings(r io.Reader, store *registryversions.Store, log *slog.Logger) (LoadStats, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var st LoadStats
	var lines [][]byte
	var nums []int
	size := 0
	flush := func() {
		ls := make([]*schema.Listing, len(lines))
		errs := make([]error, len(lines))
		par.For(len(lines), 16, func(i int) { ls[i], errs[i] = schema.DecodeListing(lines[i]) })
		ok := ls[:0]
		for i, l := range ls {
			if errs[i] != nil {
				st.Bad++
				log.Warn("bad listing skipped", "line", nums[i], "err", errs[i])
				continue
			}
			ok = append(ok, l)
		}
		for _, is := range store.Apply(ok...) {
			st.Issues++
			log.Warn("listing issue", "issue", is.String())
		}
		st.Applied += len(ok)
		lines, nums, size = lines[:0], nums[:0], 0
	}
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			st.Lines++
			if len(bytes.TrimSpace(line)) > 0 {
				lines = append(lines, line)
				nums = append(nums, st.Lines)
				if size += len(line); size >= loadBatchBytes {
					flush()
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return st, fmt.Errorf("read listings: %w", err)
		}
	}
	flush()
	return st, nil
}
