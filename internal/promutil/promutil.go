// Package promutil holds what several packages do with their Prometheus
// collectors.
package promutil

import "github.com/prometheus/client_golang/prometheus"

// Register registers cs on reg, stopping at the first error (a name
// registered twice); a nil reg registers nothing.
func Register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
