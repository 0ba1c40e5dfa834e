// Package kafkaconf is the one set of Kafka connection options that every
// command with a Kafka client shares (resolverd run, reanalyze and
// gateway, ingest): TLS and SASL from flags, as kgo options, and
// the start-up check that turns a refused connection into an error
// instead of a retry loop.
//
// # Flags
//
//	--kafka-tls, --kafka-tls-ca FILE, --kafka-tls-cert FILE,
//	--kafka-tls-key FILE, --kafka-tls-server-name NAME
//	--kafka-sasl-mechanism plain|scram-sha-256|scram-sha-512|aws-msk-iam
//	--kafka-sasl-user USER, --kafka-sasl-password-file FILE
//
// The password is read from --kafka-sasl-password-file or, without it,
// from the environment variable TOOLAUDIT_KAFKA_SASL_PASSWORD (the same
// name for every command): never from a flag value, which ps shows, and
// never logged. A regular file is read again at each authentication, so
// a rotated Secret works from the next connection on (a pipe, read once,
// keeps its first value). aws-msk-iam signs with
// the static credentials of the standard variables AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, also read at each
// authentication; credentials from instance roles or web identities need
// the AWS SDK, which this module does not carry: export them from a
// sidecar or use SCRAM.
//
// Logger adapts slog for the clients' own logs (kgo.WithLogger), the same
// for every command.
//
// # Failing fast
//
// franz-go retries most connection failures, and would retry a consumer's
// fetches with a wrong password for as long as the process lives, logging
// warnings. Check asks the brokers for metadata once at start-up, retrying
// only what can heal (a broker still starting), and fails at once, with
// ErrRefused and a hint, when the broker refused the TLS handshake or the
// SASL authentication. After start-up the clients' own retries apply: a
// credential revoked while running shows as fetch errors in the logs and
// growing lag, not as an exit.
package kafkaconf
