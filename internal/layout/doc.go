// Package layout holds the test of the module's layers (TestLayers): the
// package graph, as go list reads it, against the layers docs/design.md
// writes down. It has no code of its own.
package layout
