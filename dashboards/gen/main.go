// Command gen writes the dashboards' JSON (package dashboards) into
// dashboards/json, one file per dashboard, from the repository's root or
// from dashboards/.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/toolaudit/toolaudit/dashboards"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run() error {
	dir := filepath.Join("dashboards", "json")
	if _, err := os.Stat("gen"); err == nil { // run from dashboards/
		dir = "json"
	}
	ds, err := dashboards.All()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range ds {
		b, err := dashboards.Marshal(d.Dashboard)
		if err != nil {
			return err
		}
		path := filepath.Join(dir, d.File)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", path)
	}
	return nil
}
