package schema

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/gowebpki/jcs"
)

// Digest returns the contract's tool digest: "sha256:" and the hex SHA-256
// of the RFC 8785 (JCS) canonical JSON of {"inputSchema":…,"name":…}.
// inputSchema must be valid JSON. A call's seen_digest names a definition
// by it, so every party (hosts, the registry store, the gateway) must
// compute it alike: it lives here, with the contract.
func Digest(name string, inputSchema []byte) (string, error) {
	doc := make([]byte, 0, len(inputSchema)+len(name)+32)
	doc = append(doc, `{"inputSchema":`...)
	doc = append(doc, inputSchema...)
	doc = append(doc, `,"name":`...)
	doc = AppendString(doc, name)
	doc = append(doc, '}')
	canon, err := jcs.Transform(doc)
	if err != nil {
		return "", fmt.Errorf("canonicalize tool %q: %w", name, err)
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}
