// Package e2e holds the end-to-end tests of the streaming pipeline: the
// real resolverd binary, run as child processes (so they can be killed
// with SIGKILL), against an in-process Kafka-protocol broker (kfake) and
// the real ClickHouse engine (chengine). It has no non-test code.
package e2e
