package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/audit"
)

// The peer is a floor only if it does what it claims: each answer passes
// unchanged, after one acknowledged audit record per tool call; with the
// broker gone it answers 503, not the upstream's answer.
func TestPeer(t *testing.T) {
	answer, err := os.ReadFile(filepath.Join("..", "..", "modelproxy", "testdata", "openai", "parallel.sse"))
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.URL.Query().Get("stream") != "1" {
			http.Error(w, "unexpected "+r.URL.String(), http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(answer)
	}))
	defer up.Close()
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, audit.DefaultTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer kf.Close()
	k, err := audit.NewKafka(audit.KafkaConfig{Brokers: kf.ListenAddrs(), Timeout: time.Second}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	peer := httptest.NewServer(peerHandler(http.DefaultClient, up.URL, k))
	defer peer.Close()

	get := func() (int, string) {
		t.Helper()
		resp, err := http.Post(peer.URL+"/openai/v1/chat/completions?stream=1", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, b := get(); st != 200 || b != string(answer) {
		t.Fatalf("peer answered %d %q, want the upstream's answer", st, b)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(kf.ListenAddrs()...), kgo.ConsumeTopics(audit.DefaultTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	for n < callsPerResponse && ctx.Err() == nil {
		n += cl.PollFetches(ctx).NumRecords()
	}
	if n != callsPerResponse {
		t.Fatalf("%d audit records, want %d", n, callsPerResponse)
	}
	kf.Close()
	if st, b := get(); st != http.StatusServiceUnavailable || strings.Contains(b, "chatcmpl") {
		t.Errorf("with the broker gone the peer answered %d %q, want 503", st, b)
	}
}
