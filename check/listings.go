package check

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"

	"github.com/toolaudit/toolaudit/internal/lines"
	"github.com/toolaudit/toolaudit/registry"
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
// the order, so batching changes nothing but memory). A bad line (not a
// usable listing, or longer than DefaultMaxLine) is logged with its line
// number and skipped; an unreadable input is an error. A UTF-8 byte order
// mark at the start is skipped.
func LoadListings(r io.Reader, store registry.Applier, log *slog.Logger) (LoadStats, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var st LoadStats
	var batch [][]byte
	var nums []int
	size := 0
	flush := func() {
		ok := schema.DecodeListings(len(batch), func(i int) []byte { return batch[i] }, func(i int, err error) {
			st.Bad++
			log.Warn("bad listing skipped", "line", nums[i], "err", err)
		})
		for _, is := range store.Apply(ok...) {
			st.Issues++
			log.Warn("listing issue", "issue", is.String())
		}
		st.Applied += len(ok)
		batch, nums, size = batch[:0], nums[:0], 0
	}
	br := bufio.NewReaderSize(r, 1<<20)
	lines.SkipBOM(br)
	for {
		// Each line its own: the batch keeps it until flush.
		line, tooLong, err := lines.Append(br, nil, DefaultMaxLine)
		if len(line) > 0 || tooLong {
			st.Lines++
			switch {
			case tooLong:
				st.Bad++
				log.Warn("bad listing skipped", "line", st.Lines, "err", "line longer than "+strconv.Itoa(DefaultMaxLine)+" bytes")
			case !lines.Blank(line):
				batch = append(batch, line)
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
