package embedded

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/toolaudit/toolaudit/chengine"
	"github.com/toolaudit/toolaudit/chengine/chenginetest"
)

// TestStackSurvivesStrayConnections: connections that make the engine
// abort when they reach it (a failed native login: a wrong password, an
// unknown user, an unknown database; a TLS ClientHello on its plain port; a client reset
// between queries) leave the stack's engine serving: no restart, the same
// process, and each stray client gets an answer that says what is wrong.
func TestStackSurvivesStrayConnections(t *testing.T) {
	needEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	s, err := Start(ctx, Options{Dir: dir, KafkaPort: -1, ClickHouseTCP: -1, ClickHouseHTTP: -1,
		Supervise: []chengine.SuperviseOption{chengine.WithBackoff(100*time.Millisecond, time.Second), chengine.WithProbe(100*time.Millisecond, time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addr, pid := s.ClickHouse.Addr(), s.ClickHouse.Server().PID()
	survived := func(what string) {
		t.Helper()
		// The supervisor reads a fatal report within a quarter of a
		// second and kills the engine; an abort ends it within 4 s.
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			if n := s.ClickHouse.Restarts(); n != 0 || s.ClickHouse.Server().PID() != pid || s.Ready() != nil {
				t.Fatalf("%s: the engine went down (restarts %d, ready %v)", what, n, s.Ready())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var ex *clickhouse.Exception
	authFailed := func(err error) bool { // REQUIRED_PASSWORD, AUTHENTICATION_FAILED, ...
		return errors.As(err, &ex) && (ex.Code == 516 || ex.Code >= 192 && ex.Code <= 194)
	}
	if err := chenginetest.Login(t, addr, "default", "wrong", ""); !authFailed(err) {
		t.Errorf("wrong password: %v, want AUTHENTICATION_FAILED", err)
	}
	survived("a wrong password")
	if err := chenginetest.Login(t, addr, "nobody", "", ""); !authFailed(err) {
		t.Errorf("unknown user: %v, want AUTHENTICATION_FAILED", err)
	}
	survived("an unknown user")

	if err := chenginetest.Login(t, addr, "default", "", "no_such_db"); !errors.As(err, &ex) || ex.Code != 81 {
		t.Errorf("unknown database: %v, want UNKNOWN_DATABASE", err)
	}
	survived("an unknown database")

	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
	var rec tls.RecordHeaderError
	if err == nil {
		c.Close()
	}
	if !errors.As(err, &rec) {
		t.Errorf("TLS handshake: %v, want a plain-text answer (tls.RecordHeaderError)", err)
	}
	survived("a TLS ClientHello")

	// A client killed between queries: its connection reset while the
	// engine waits for the next query.
	chenginetest.ResetIdle(t, addr)
	survived("a client reset between queries")

	if err := chenginetest.Login(t, addr, "default", "", ""); err != nil {
		t.Fatalf("the engine after the stray connections: %v", err)
	}
	if b, _ := os.ReadFile(chengine.LogPath(filepath.Join(dir, "clickhouse"))); strings.Contains(string(b), "<Fatal>") {
		t.Fatalf("the engine logged a fatal error:\n%s", b)
	}
}
