// Package connsec builds the client side of a secured connection from
// files: a TLS configuration (the CAs to trust, a client certificate and
// its key, the server name to expect) and secrets such as passwords.
//
// Secrets come from a file or from one fixed environment variable, never
// from a flag value: ps shows every process's arguments to every user of
// the machine, while a file's permissions and a process's environment are
// private. A secret file is read again at each use (Secret.Read), so a
// rotated Kubernetes Secret, which is updated in place in its mounted
// volume, takes effect at the next connection without a restart.
// Certificates are read once, when the configuration is built: rotating
// them needs a restart (a rolling one in Kubernetes).
//
// Used by package kafkaconf (Kafka) and by resolverd's ClickHouse flags;
// the HTTP server's TLS is the server side and lives with the server.
package connsec
