package connsec

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/internal/testkit/tlstest"
)

func TestSecretRead(t *testing.T) {
	dir := t.TempDir()
	file := func(name, v string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := map[string]string{"PW": "from-env"}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct {
		name       string
		s          Secret
		want, from string
		err        string
	}{
		{"file with newline", Secret{File: file("a", "s3cret\n")}, "s3cret", "file", ""},
		{"file with crlf", Secret{File: file("b", "s3cret\r\n")}, "s3cret", "file", ""},
		{"inner spaces kept", Secret{File: file("c", " a b ")}, " a b ", "file", ""},
		{"env", Secret{Env: "PW"}, "from-env", "environment variable PW", ""},
		{"unset env", Secret{Env: "NONE"}, "", "", "no secret"},
		{"both", Secret{File: file("d", "x"), Env: "PW"}, "", "", "keep one"},
		{"empty file", Secret{File: file("e", "\n")}, "", "", "empty"},
		{"missing file", Secret{File: filepath.Join(dir, "absent")}, "", "", "no such file"},
		{"directory", Secret{File: dir}, "", "", "is a directory"},
		{"pipe", Secret{File: pipe(t, "from-pipe\n")}, "from-pipe", "file", ""},
		{"too large", Secret{File: file("f", strings.Repeat("x", maxSecret+1))}, "", "", "more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, from, err := tc.s.Read(getenv)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Read = %q, %v; want an error saying %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want || !strings.HasPrefix(from, tc.from) {
				t.Fatalf("Read = %q, %q, %v; want %q from %s", got, from, err, tc.want, tc.from)
			}
		})
	}
}

func TestTLSConfig(t *testing.T) {
	certs := tlstest.New(t)
	if c, err := (TLS{}).Config(); c != nil || err != nil {
		t.Fatalf("zero TLS: %v, %v", c, err)
	}
	c, err := TLS{ServerName: "x"}.Config()
	if err != nil || c == nil || c.ServerName != "x" || c.RootCAs != nil {
		t.Fatalf("server name alone turns TLS on with the system's CAs: %+v, %v", c, err)
	}
	c, err = TLS{CA: certs.CAFile, Cert: certs.ClientCertFile, Key: certs.ClientKeyFile}.Config()
	if err != nil || c.RootCAs == nil || len(c.Certificates) != 1 {
		t.Fatalf("mutual: %+v, %v", c, err)
	}
	if _, err := (TLS{Cert: certs.ClientCertFile, Key: certs.ServerKeyFile}).Config(); err == nil {
		t.Fatal("a key that does not match its certificate was accepted")
	}
	if _, err := (TLS{Key: certs.ClientKeyFile}).Config(); err == nil {
		t.Fatal("a key without its certificate was accepted")
	}
}

// pipe returns the read end of a pipe holding v, as /dev/fd/N, the way
// bash's <(...) passes a secret.
func pipe(t *testing.T, v string) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if _, err := w.WriteString(v); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return fmt.Sprintf("/dev/fd/%d", r.Fd())
}

// TestSecretReader: a regular file is read again at each use (rotation);
// a pipe, read once, keeps its first value.
func TestSecretReader(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte("one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	read, err := Secret{File: file}.Reader(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if v, err := read(); v != "two" || err != nil {
		t.Fatalf("after rotation: %q, %v", v, err)
	}
	read, err = Secret{File: pipe(t, "piped")}.Reader(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if v, err := read(); v != "piped" || err != nil {
			t.Fatalf("pipe: %q, %v", v, err)
		}
	}
	if _, err := (Secret{File: file + ".absent"}).Reader(os.Getenv); err == nil {
		t.Fatal("a missing file is not an error at start")
	}
}
