package chengine_test

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
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

// usersConfig adds user alice with a password, so that the guard is seen
// to let a configured login through.
func usersConfig(file string) string {
	return `<clickhouse><user_directories replace="replace"><users_xml><path>` + file + `</path></users_xml></user_directories>` +
		`<profiles><default/></profiles><quotas><default/></quotas><users>` +
		`<default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota><access_management>1</access_management></default>` +
		`<alice><password>s3cret</password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></alice>` +
		`</users></clickhouse>`
}

// rawHello is a native-protocol client Hello.
func rawHello(client, db, user, password string) []byte {
	str := func(b []byte, s string) []byte { return append(binary.AppendUvarint(b, uint64(len(s))), s...) }
	b := str([]byte{0}, client)
	b = binary.AppendUvarint(b, 24)
	b = binary.AppendUvarint(b, 8)
	b = binary.AppendUvarint(b, 54460)
	return str(str(str(b, db), user), password)
}

// sendRaw writes b to addr and returns the first byte of the answer (0
// when the guard closed without one).
func sendRaw(t *testing.T, addr string, b []byte, closeEarly bool) byte {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(b)
	if closeEarly {
		return 0
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var first [1]byte
	if _, err := io.ReadFull(c, first[:]); err != nil {
		return 0
	}
	return first[0]
}

// TestGuard: with Options.Guard, connections that abort the engine when
// they reach it are answered by the guard (a native exception, packet 2)
// and logged, and the engine serves on: failed logins, an unknown
// database, a TLS ClientHello,
// HTTP, garbage, a Hello without a user or too large, a Hello cut short,
// a client reset between queries. Good logins pass, a configured user's
// included, and so do queries and INSERTs.
func TestGuard(t *testing.T) {
	rec := &recorder{}
	dir := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "users.xml")
	if err := os.WriteFile(cfg, []byte(usersConfig(cfg)), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := chenginetest.Start(t, chengine.Options{Dir: dir, Guard: true, Logger: slog.New(rec), ConfigFile: cfg})
	addr := srv.Addr()
	if srv.EngineAddr() == addr {
		t.Fatal("the engine listens on the guarded port")
	}
	ctx := context.Background()
	var ex *clickhouse.Exception
	for _, bad := range [][2]string{{"default", "wrong"}, {"nobody", ""}, {"alice", "wrong"}} {
		if err := chenginetest.Login(t, addr, bad[0], bad[1], ""); !errors.As(err, &ex) || ex.Code != 516 && (ex.Code < 192 || ex.Code > 194) {
			t.Errorf("login %s/%s: %v, want an authentication failure", bad[0], bad[1], err)
		}
	}
	// An unknown database in the Hello: UNKNOWN_DATABASE, from the guard.
	if err := chenginetest.Login(t, addr, "default", "", "no_such_db"); !errors.As(err, &ex) || ex.Code != 81 {
		t.Errorf("unknown database: %v, want UNKNOWN_DATABASE", err)
	}
	_, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
	var rh tls.RecordHeaderError
	if !errors.As(err, &rh) {
		t.Errorf("TLS ClientHello: %v, want a plain-text answer", err)
	}
	for name, b := range map[string][]byte{
		"HTTP":          []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		"garbage":       {0x7f, 1, 2, 3},
		"no user":       rawHello("stray", "", "", ""),
		"a large Hello": rawHello(strings.Repeat("x", 70<<10), "", "default", ""),
	} {
		if got := sendRaw(t, addr, b, false); got != 2 {
			t.Errorf("%s: answer starts with %#x, want an exception (2)", name, got)
		}
	}
	sendRaw(t, addr, rawHello("stray", "", "default", "")[:5], true) // cut short
	// A client killed between queries: reset while the engine waits.
	chenginetest.ResetIdle(t, addr)

	// An abort would end the engine within about 4 s of its fatal line.
	time.Sleep(5 * time.Second)
	if chengine.Exited(srv) {
		t.Fatalf("the engine died: %v", srv.Wait())
	}
	if b, _ := os.ReadFile(chengine.LogPath(dir)); strings.Contains(string(b), "<Fatal>") {
		t.Fatalf("the engine logged a fatal error:\n%s", b)
	}
	for _, want := range []string{"refused a TLS ClientHello", "refused a native login the engine does not accept",
		"refused an HTTP request", "refused a connection whose first byte", "refused a Hello without a user", "refused a Hello larger"} {
		if !rec.logged("chengine: guard: " + want) {
			t.Errorf("no log line %q", want)
		}
	}

	if err := chenginetest.Login(t, addr, "alice", "s3cret", ""); err != nil {
		t.Fatalf("alice: %v", err)
	}
	c := open(t, addr)
	exec(t, c, "DROP TABLE IF EXISTS default.guarded", "CREATE TABLE default.guarded (n UInt64) ENGINE = MergeTree ORDER BY n")
	b, err := c.PrepareBatch(ctx, "INSERT INTO default.guarded")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100000 {
		b.Append(uint64(i))
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	if n := count(t, c, "SELECT sum(n) FROM default.guarded"); n != 99999*100000/2 {
		t.Fatalf("sum %d", n)
	}
}

// logged reports whether a record's message starts with prefix.
func (r *recorder) logged(prefix string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, lr := range r.recs {
		if strings.HasPrefix(lr.msg, prefix) {
			return true
		}
	}
	return false
}
