// Command gen writes the dashboards' JSON (package dashboards), one file
// per dashboard, into dashboards/json (for provisioning) and
// dashboards/import (for Grafana's import page), from the repository's
// root or from dashboards/.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"

	"github.com/toolaudit/toolaudit/dashboards"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run() error {
	root := "dashboards"
	if _, err := os.Stat("gen"); err == nil { // run from dashboards/
		root = "."
	}
	for _, flavor := range []struct {
		dir     string
		marshal func(dashboard.Dashboard) ([]byte, error)
	}{{"json", dashboards.Marshal}, {"import", dashboards.MarshalImport}} {
		dir := filepath.Join(root, flavor.dir)
		ds, err := dashboards.All()
		if err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for _, d := range ds {
			b, err := flavor.marshal(d.Dashboard)
			if err != nil {
				return err
			}
			path := filepath.Join(dir, d.File)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				return err
			}
			fmt.Println("wrote", path)
		}
	}
	return nil
}
