package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/toolaudit/toolaudit/audit"
)

// BenchmarkResolve: one POST /v1/resolve through the handler (no network),
// a single call or a batch of ten sample calls, without an audit trail
// and with one producing to an in-process broker (kfake, whose own work
// is in the figure: a real broker runs elsewhere). 32 requests per core
// are in flight (as from many hosts), so ns/op is the cost per request
// at saturation, not one request's latency.
func BenchmarkResolve(b *testing.B) {
	lines, _ := sample(b)
	for _, auditOn := range []bool{false, true} {
		for _, batch := range []int{1, 10} {
			name := "audit=off"
			if auditOn {
				name = "audit=kfake"
			}
			b.Run(name+"/calls="+map[int]string{1: "1", 10: "10"}[batch], func(b *testing.B) {
				cfg := Config{Store: sampleStore(b)}
				if auditOn {
					k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(6, audit.DefaultTopic))
					if err != nil {
						b.Fatal(err)
					}
					defer k.Close()
					p, err := audit.NewKafka(audit.KafkaConfig{Brokers: k.ListenAddrs()}, nil, nil)
					if err != nil {
						b.Fatal(err)
					}
					defer p.Close()
					cfg.Audit = p
				}
				h, err := New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				var bodies [][]byte
				for i := 0; i+batch <= len(lines); i += batch {
					if batch == 1 {
						bodies = append(bodies, []byte(lines[i]))
					} else {
						bodies = append(bodies, []byte("["+strings.Join(lines[i:i+batch], ",")+"]"))
					}
				}
				ctx := context.Background()
				b.ReportAllocs()
				b.SetParallelism(32)
				b.RunParallel(func(pb *testing.PB) {
					i := 0
					for pb.Next() {
						req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/resolve", bytes.NewReader(bodies[i%len(bodies)]))
						w := httptest.NewRecorder()
						h.ServeHTTP(w, req)
						if w.Code != 200 {
							b.Fatalf("status %d: %s", w.Code, w.Body)
						}
						i++
					}
				})
			})
		}
	}
}
