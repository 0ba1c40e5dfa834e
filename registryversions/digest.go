package registryversions

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/gowebpki/jcs"

	"github.com/toolaudit/toolaudit/schema"
)

// Digest returns the contract's tool digest: "sha256:" and the hex SHA-256
// of the RFC 8785 (JCS) canonical JSON of {"inputSchema":…,"name":…}.
// inputSchema must be valid JSON.
func Digest(name string, inputSchema []byte) (string, error) {
	doc := make([]byte, 0, len(inputSchema)+len(name)+32)
	doc = append(doc, `{"inputSchema":`...)
	doc = append(doc, inputSchema...)
	doc = append(doc, `,"name":`...)
	doc = schema.AppendString(doc, name)
	doc = append(doc, '}')
	canon, err := jcs.Transform(doc)
	if err != nil {
		return "", fmt.Errorf("canonicalize tool %q: %w", name, err)
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}
