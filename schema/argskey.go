package schema

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
)

// ArgsKey is the secret key of keyed argument hashes (args_hash).
//
// Without a key, args_hash is the plain SHA-256 of the arguments' compact
// JSON: anyone who can read the table can confirm a guess of a call's
// arguments ({"password":"hunter2"}) by hashing it. With a key, args_hash
// is an HMAC-SHA-256 under it, "hmac-sha256:<id>:<hex>", and a guess can
// be confirmed only by whoever holds the key.
//
// Equality: two hashes with the same id are equal exactly when the
// arguments' compact JSON is equal; hashes made under different keys (two
// ids, or a keyed and a plain one) say nothing about each other. Rotating
// the key therefore starts a new equivalence domain: rows written before
// keep their hashes, and queries that group or join on args_hash compare
// within one id (the id is part of the value, so a GROUP BY never merges
// two keys). To rotate, give every instance the new key and restart
// them; to compare across a rotation, re-analyze the old calls (a new
// --analysis over the topics) under the new key.
type ArgsKey struct {
	secret []byte
	prefix string // "hmac-sha256:<id>:"
}

// MinArgsKeyLen is the shortest key accepted, in bytes: 32 bytes of a
// random key, or 32 characters of a hex or base64 text of one.
const MinArgsKeyLen = 32

// NewArgsKey makes a key from secret (the bytes of the key file or
// variable, taken as they are). Its ID is the first 8 hex digits of an
// HMAC of a fixed text under the key: it names the key in every hash
// without revealing it (the key is long and random, so the ID cannot be
// used to guess it).
func NewArgsKey(secret []byte) (*ArgsKey, error) {
	if len(secret) < MinArgsKeyLen {
		return nil, errors.New("args hash key of " + strconv.Itoa(len(secret)) + " bytes, shorter than " + strconv.Itoa(MinArgsKeyLen))
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("toolaudit args_hash key id"))
	id := hex.EncodeToString(m.Sum(nil)[:4])
	return &ArgsKey{secret: append([]byte(nil), secret...), prefix: "hmac-sha256:" + id + ":"}, nil
}

// ID names the key: the part of every hash between "hmac-sha256:" and the
// digest.
func (k *ArgsKey) ID() string { return k.prefix[len("hmac-sha256:") : len(k.prefix)-1] }

// String never shows the secret.
func (k *ArgsKey) String() string { return "args hash key " + k.ID() }

// GoString never shows the secret either (%#v).
func (k *ArgsKey) GoString() string { return k.String() }
