package chengine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

const (
	// PackageName and PackageVersion name the npm package that ships
	// libchdb.so. The version is pinned so every machine runs the same engine.
	PackageName    = "@chdb/lib-linux-x64-gnu"
	PackageVersion = "26.7.3-stable.1"
	// Package is the npm install spec, PackageName@PackageVersion.
	Package = PackageName + "@" + PackageVersion

	// EnvLib, when set, is the path of libchdb.so and overrides the cache dir.
	EnvLib = "CHENGINE_LIB"
	// EnvDir, when set, overrides the default cache dir (see DefaultDir).
	// scripts/fetch-chengine.sh honours it too, so both agree.
	EnvDir = "CHENGINE_DIR"
)

// ErrNotFound reports that libchdb.so is not installed. Callers test for it
// with errors.Is to tell "not fetched yet" (skippable) from real failures.
var ErrNotFound = errors.New("chengine: libchdb.so not found (fetch it with scripts/fetch-chengine.sh or `go run ./cmd/chengine fetch`, or set " + EnvLib + ")")

// DefaultDir returns the cache dir the library is fetched into: $CHENGINE_DIR
// if set, else $XDG_CACHE_HOME/toolaudit/chengine, else
// ~/.cache/toolaudit/chengine. It lives outside the repository because the
// unpacked package is about 540 MB.
func DefaultDir() (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		return d, nil
	}
	c, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("chengine: no cache dir: %w", err)
	}
	return filepath.Join(c, "toolaudit", "chengine"), nil
}

// libPath is where `npm install --prefix dir` puts the library.
func libPath(dir string) string {
	return filepath.Join(dir, "node_modules", PackageName, "libchdb.so")
}

// Find returns the path of libchdb.so. $CHENGINE_LIB wins if set; otherwise it
// looks in dir, or DefaultDir() when dir is "". The error wraps ErrNotFound
// when the file is absent.
func Find(dir string) (string, error) {
	if p := os.Getenv(EnvLib); p != "" {
		return checkLib(p, EnvLib+"="+p)
	}
	if dir == "" {
		d, err := DefaultDir()
		if err != nil {
			return "", err
		}
		dir = d
	}
	return checkLib(libPath(dir), "")
}

func checkLib(p, why string) (string, error) {
	st, err := os.Stat(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if why != "" {
			p += " (from " + why + ")"
		}
		return "", fmt.Errorf("%w: no file %s", ErrNotFound, p)
	case err != nil:
		return "", fmt.Errorf("chengine: %w", err)
	case st.IsDir():
		return "", fmt.Errorf("chengine: %s is a directory, want libchdb.so", p)
	}
	return p, nil
}

// Fetch installs Package into dir (DefaultDir() when ""), unless the pinned
// version is already there. It runs npm, the only way this project can
// download the engine; it takes about 10 s, a 170 MB download and 545 MB of
// disk. npm's tarball cache is a temporary dir, removed afterwards: keeping
// it would cost every machine 170 MB to spare the rare re-install (a new
// pinned version) a download. scripts/fetch-chengine.sh does the same.
func Fetch(ctx context.Context, dir string) error {
	if dir == "" {
		d, err := DefaultDir()
		if err != nil {
			return err
		}
		dir = d
	}
	// Earlier versions kept npm's cache in dir/.npm.
	if err := os.RemoveAll(filepath.Join(dir, ".npm")); err != nil {
		return fmt.Errorf("chengine: %w", err)
	}
	if installedVersion(dir) == PackageVersion {
		if _, err := checkLib(libPath(dir), ""); err == nil {
			return nil
		}
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("chengine: fetching %s needs npm (apt-get install npm): %w", Package, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("chengine: %w", err)
	}
	cache, err := os.MkdirTemp(dir, ".npm-cache.")
	if err != nil {
		return fmt.Errorf("chengine: %w", err)
	}
	defer os.RemoveAll(cache)
	cmd := exec.CommandContext(ctx, npm, "install", "--no-save", "--no-audit", "--no-fund",
		"--cache", cache, "--prefix", dir, Package)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("chengine: npm install %s into %s: %w\n%s", Package, dir, err, tail(out.Bytes(), 2000))
	}
	_, err = checkLib(libPath(dir), "")
	return err
}

// installedVersion reads the version of the package npm installed in dir, or
// "" if there is none.
func installedVersion(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", PackageName, "package.json"))
	if err != nil {
		return ""
	}
	var pkg struct{ Version string }
	if json.Unmarshal(b, &pkg) != nil {
		return ""
	}
	return pkg.Version
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
