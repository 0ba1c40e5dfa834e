package offline

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/toolaudit/toolaudit/registryversions"
	"github.com/toolaudit/toolaudit/schema"
)

// LoadStats counts what LoadListings read.
type LoadStats struct {
	Lines, Applied, Bad, Issues int
}

// LoadListings reads JSONL listing events from r and applies them to the
// store in one batch. A bad line is logged with its line number and
// skipped; an unreadable input is an error.
func LoadListings(r io.Reader, store *registryversions.Store, log *slog.Logger) (LoadStats, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var st LoadStats
	var ls []*schema.Listing
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			st.Lines++
			if len(bytes.TrimSpace(line)) > 0 {
				l, derr := schema.DecodeListing(line)
				if derr != nil {
					st.Bad++
					log.Warn("bad listing skipped", "line", st.Lines, "err", derr)
				} else {
					ls = append(ls, l)
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
	for _, is := range store.Apply(ls...) {
		st.Issues++
		log.Warn("listing issue", "issue", is.String())
	}
	st.Applied = len(ls)
	return st, nil
}
