package connsec

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// Secret says where a secret comes from: the file File names or, when
// File is empty, environment variable Env. A secret never comes from a
// flag value.
type Secret struct {
	// File is a path (typically a mounted Secret); empty: use Env.
	File string
	// Env is the fixed variable read when File is empty.
	Env string
}

// maxSecret bounds a secret file: passwords and tokens are short, so
// anything near this is the wrong file.
const maxSecret = 64 << 10

// ErrNoSecret means neither the file nor the variable was given.
var ErrNoSecret = errors.New("no secret given")

// Read returns the secret and where it came from ("file PATH" or
// "environment variable NAME", for logs: never the value). A file's
// trailing line breaks are dropped (editors and `echo` add one); an empty
// secret is an error. getenv is os.Getenv in production.
//
// Both set is an error rather than a precedence rule: a deployment that
// sets both has two sources of truth, and one of them is stale.
func (s Secret) Read(getenv func(string) string) (value, from string, err error) {
	env := ""
	if s.Env != "" {
		env = getenv(s.Env)
	}
	switch {
	case s.File != "" && env != "":
		return "", "", fmt.Errorf("both file %s and environment variable %s are set: keep one", s.File, s.Env)
	case s.File != "":
		b, err := readBounded(s.File, maxSecret)
		if err != nil {
			return "", "", fmt.Errorf("secret file: %w", err)
		}
		v := strings.TrimRight(string(b), "\r\n")
		if v == "" {
			return "", "", fmt.Errorf("secret file %s is empty", s.File)
		}
		return v, "file " + s.File, nil
	case env != "":
		return env, "environment variable " + s.Env, nil
	}
	return "", "", ErrNoSecret
}

// Given reports whether Read has a source to read (it may still fail).
func (s Secret) Given(getenv func(string) string) bool {
	return s.File != "" || (s.Env != "" && getenv(s.Env) != "")
}

// Reader reads the secret once now (so a missing file fails at start)
// and returns a function that gives it at each use: read again from a
// regular file, so that a rotated Secret (updated in place in its mounted
// volume) takes effect, and the first value otherwise (a variable, or a
// pipe such as bash's <(...), which can be read once).
func (s Secret) Reader(getenv func(string) string) (func() (string, error), error) {
	first, _, err := s.Read(getenv)
	if err != nil {
		return nil, err
	}
	if s.File == "" {
		return func() (string, error) { return first, nil }, nil
	}
	if fi, err := os.Stat(s.File); err != nil || !fi.Mode().IsRegular() {
		return func() (string, error) { return first, nil }, nil
	}
	return func() (string, error) {
		v, _, err := s.Read(getenv)
		return v, err
	}, nil
}
