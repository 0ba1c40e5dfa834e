package check

import (
	"log/slog"
	"os"

	"github.com/toolaudit/toolaudit/registry"
)

// LoadListingsFile is LoadListings of the file at path.
func LoadListingsFile(path string, store registry.Applier, log *slog.Logger) (LoadStats, error) {
	f, err := os.Open(path)
	if err != nil {
		return LoadStats{}, err
	}
	defer f.Close()
	return LoadListings(f, store, log)
}
