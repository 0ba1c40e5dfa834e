package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/toolaudit/toolaudit/internal/connsec"
	"github.com/toolaudit/toolaudit/schema"
)

// argsKeyEnv holds the args_hash key itself. The key is never a flag
// value (it would show in ps and in shell history) and never logged: a
// flag names a file that holds it, or this variable holds it.
const argsKeyEnv = "RESOLVERD_ARGS_HASH_KEY"

// argsKeyFlag registers --args-hash-key-file on fs.
func argsKeyFlag(fs *flag.FlagSet) *string {
	return fs.String("args-hash-key-file", "", "`FILE` holding the secret key of args_hash (HMAC-SHA-256; at least 32 bytes, trailing newline ignored); "+
		"or set the key in "+argsKeyEnv+". Without a key args_hash is a plain SHA-256, which lets readers of the decisions confirm guessed arguments")
}

// loadArgsKey returns the key of args_hash from the file, or from the
// environment, or nil when neither is set. Both set is a usage error.
func loadArgsKey(file string, log *slog.Logger) (*schema.ArgsKey, error) {
	src := connsec.Secret{File: file, Env: argsKeyEnv}
	if !src.Given(os.Getenv) {
		return nil, nil
	}
	secret, from, err := src.Read(os.Getenv)
	if err != nil {
		return nil, usageError{fmt.Errorf("args hash key: %w", err)}
	}
	k, err := schema.NewArgsKey([]byte(secret))
	if err != nil {
		return nil, usageError{errors.New(err.Error())}
	}
	log.Info("args_hash keyed", "key_id", k.ID(), "from", from)
	return k, nil
}
