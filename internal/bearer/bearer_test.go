package bearer

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func TestFiles(t *testing.T) {
	for _, tc := range []struct {
		file    string
		tokens  int
		wantErr string
	}{
		{"good.tokens", 3, ""},
		{"empty.tokens", 0, ""},
		{"short.bad.tokens", 0, "line 1: token shorter than 16 bytes"},
		{"name.bad.tokens", 0, `line 1: "bad name" before ':' is not a name`},
		{"twice.bad.tokens", 0, "line 2: token given twice"},
		{"samename.bad.tokens", 0, `line 2: name "a" given twice`},
		{"space.bad.tokens", 0, "line 1: token contains a space"},
		{"absent.tokens", 0, "no such file"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			tk, err := Load(filepath.Join("testdata", tc.file), nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tk.Len() != tc.tokens {
				t.Fatalf("%d tokens, want %d", tk.Len(), tc.tokens)
			}
		})
	}
}

func TestAuthorize(t *testing.T) {
	tk, err := Load("testdata/good.tokens", nil)
	if err != nil {
		t.Fatal(err)
	}
	empty, err := Load("testdata/empty.tokens", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		tokens *Tokens
		header string
		want   string
		err    error
	}{
		{"named", tk, "Bearer 0123456789abcdef0123", "ci-runner", nil},
		{"named, spaces around the name in the file", tk, "Bearer fedcba9876543210fedc", "gateway", nil},
		{"unnamed", tk, "Bearer unnamedtoken-0000000000", "line-5", nil},
		{"scheme in lower case", tk, "bearer 0123456789abcdef0123", "ci-runner", nil},
		{"no header", tk, "", "", ErrMissing},
		{"basic", tk, "Basic Y2k6c2VjcmV0", "", ErrMissing},
		{"empty token", tk, "Bearer ", "", ErrMissing},
		{"wrong token", tk, "Bearer 0123456789abcdef0124", "", ErrInvalid},
		{"a prefix of a token", tk, "Bearer 0123456789abcdef012", "", ErrInvalid},
		{"name:token as presented", tk, "Bearer ci-runner:0123456789abcdef0123", "", ErrInvalid},
		{"no tokens configured", empty, "Bearer 0123456789abcdef0123", "", ErrNoTokens},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/v1/resolve", nil)
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			name, err := tc.tokens.Authorize(r)
			if !errors.Is(err, tc.err) || name != tc.want {
				t.Fatalf("Authorize = %q, %v; want %q, %v", name, err, tc.want, tc.err)
			}
		})
	}
}

// TestReloadAndWatch: a changed file is picked up by Reload and by Watch
// (content rewritten in place, and a new file renamed over it, as a
// Kubernetes Secret update does); a broken file keeps the tokens in force.
func TestReloadAndWatch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	write := func(content string) {
		t.Helper()
		tmp := filepath.Join(dir, "tmp")
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	authorized := func(tk *Tokens, tok string) bool {
		r := httptest.NewRequest("POST", "/", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		_, err := tk.Authorize(r)
		return err == nil
	}
	const a, b = "aaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbb"
	write("x:" + a + "\n")
	tk, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	write("x:" + b + "\n")
	if err := tk.Reload(); err != nil || authorized(tk, a) || !authorized(tk, b) {
		t.Fatalf("after Reload: %v, a %v, b %v", err, authorized(tk, a), authorized(tk, b))
	}
	write("x:short\n")
	if err := tk.Reload(); err == nil || !authorized(tk, b) {
		t.Fatalf("a broken file: %v, b still %v", err, authorized(tk, b))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); tk.Watch(ctx, 10*time.Millisecond) }()
	defer func() { cancel(); <-done }()
	write("x:" + a + "\n")
	wait := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("Watch: %s", what)
			}
		}
	}
	wait("new file not picked up", func() bool { return authorized(tk, a) && !authorized(tk, b) })
	// Rewritten in place, same size: the modification time tells.
	time.Sleep(20 * time.Millisecond)
	if err := os.WriteFile(path, []byte("x:"+b+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wait("rewrite not picked up", func() bool { return authorized(tk, b) && !authorized(tk, a) })
}
