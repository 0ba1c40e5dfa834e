// Package bins builds the module's commands for the tests that run them
// as a user does (e2e, deploy), once per test run, with one set of flags
// per flavour, into one directory that every test binary of the run
// shares.
//
// go test runs each package's tests as a process of its own, several at
// once; each used to build resolverd and ingest again into a directory
// of its own. Here they build into the same paths under a lock: the
// first build of a run compiles and links, and every later one finds its
// output up to date (go build leaves a binary whose build ID matches
// alone: about half a second) and waits for no compile at all. Go's own
// staleness check decides, so a changed source is never run stale.
package bins

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// Flavour is a set of build flags.
type Flavour struct {
	name string
	env  []string
	args []string
}

var (
	// Dev is how make build and the tests compile: go build with the
	// environment's settings. Its packages come from the build cache the
	// test binaries of the run filled.
	Dev = Flavour{name: "dev"}
	// Image is the Dockerfile's build without -trimpath, which changes
	// no linking (the image's binaries are static either way) but every
	// package's cache key: CGO_ENABLED=0 and -tags nochengine. Under make
	// test, which runs everything with CGO_ENABLED=0, only the packages
	// the tag changes compile again.
	Image = Flavour{name: "image", env: []string{"CGO_ENABLED=0"}, args: []string{"-tags", "nochengine"}}
)

var mu sync.Mutex // one build at a time within a process; the lock file across them

// Build returns the path of ./cmd/<name> built in flavour f, building it
// if it is not up to date; for a TestMain, which has no testing.TB.
func Build(name string, f Flavour) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	// One directory per checkout: two checkouts' runs must not replace
	// each other's binaries between a build and its use.
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), "toolaudit-test-bins", hex.EncodeToString(sum[:6]), f.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("bins: lock %s: %w", dir, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it too
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", append(append([]string{"build"}, f.args...), "-o", out, "./cmd/"+name)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), f.env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("bins: go build %s (%s): %w\n%s", name, f.name, err, b)
	}
	return out, nil
}

// Path is Build for a test: a failed build fails tb.
func Path(tb testing.TB, name string, f Flavour) string {
	tb.Helper()
	p, err := Build(name, f)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// ModuleRoot is the directory of go.mod at or above the working
// directory (a test's package directory).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("bins: no go.mod above the working directory")
		}
		dir = parent
	}
}
