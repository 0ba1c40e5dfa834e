//go:build nochengine

package chengine

import "errors"

// built is false in binaries built with -tags nochengine: the production
// image's (deploy/Dockerfile). Loading the engine library takes purego,
// whose dlopen links the binary against the C library even without cgo,
// so a binary that never runs the engine leaves it out and stays static
// (it runs on distroless/static, which has no C library).
const built = false

// errNotBuilt is Start's error in such a binary.
var errNotBuilt = errors.New("chengine: this binary was built without the embedded engine (-tags nochengine): run it against your own Kafka and ClickHouse")

func serve(string, []string) error { return errNotBuilt }
