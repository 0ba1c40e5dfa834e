package connsec

import (
	"errors"
	"fmt"
	"io"
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

func readFull(r io.Reader, b []byte) (int, error) {
	n, err := io.ReadFull(r, b)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}
