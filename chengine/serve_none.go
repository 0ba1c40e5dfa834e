//go:build nochengine

package chengine

// built is false in binaries built with -tags nochengine: the production
// image's (deploy/Dockerfile). Loading the engine library takes purego,
// whose dlopen links the binary against the C library even without cgo,
// so a binary that never runs the engine leaves it out and stays static
// (it runs on distroless/static, which has no C library).
const built = false

func serve(string, []string) error { return ErrNotBuilt }
