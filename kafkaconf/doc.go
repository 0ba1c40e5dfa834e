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
//	--kafka-sasl-mechanism plain|scram-sha-256|scram-sha-512|aws-msk-iam|oauthbearer
//	--kafka-sasl-user USER, --kafka-sasl-password-file FILE
//	--kafka-sasl-oauth-token-url URL, --kafka-sasl-oauth-client-id ID,
//	--kafka-sasl-oauth-client-secret-file FILE, --kafka-sasl-oauth-scope SCOPE,
//	--kafka-sasl-oauth-client-auth basic|post, --kafka-sasl-oauth-extension KEY=VALUE[,KEY=VALUE]
//
// The password is read from --kafka-sasl-password-file or, without it,
// from the environment variable TOOLAUDIT_KAFKA_SASL_PASSWORD (the same
// name for every command): never from a flag value, which ps shows, and
// never logged. A regular file is read again at each authentication, so
// a rotated Secret works from the next connection on (a pipe, read once,
// keeps its first value). The OAuth client secret likewise, from
// --kafka-sasl-oauth-client-secret-file or
// TOOLAUDIT_KAFKA_SASL_OAUTH_CLIENT_SECRET, read again at each token
// request. Files are the better choice: a process's environment is
// readable in /proc/PID/environ by the same user's processes and root.
//
// # aws-msk-iam
//
// It signs with the static credentials of the standard variables
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN when
// they are set (read at each authentication), and otherwise with the AWS
// SDK's default chain (web identity, profiles, container credentials,
// the instance role), cached by aws.CredentialsCache and refreshed
// awsExpiryWindow (5 min) before they expire. A chain's failure is a
// CredentialsError: a refusal unless it is a network error.
//
// # oauthbearer
//
// Tokens come from the client credentials grant (RFC 6749 §4.4) at the
// token endpoint, cached and replaced once 80% of their lifetime has
// passed. The refresh happens on demand, when franz-go authenticates a
// new connection or re-authenticates one (a broker with KIP-368's
// connections.max.reauth.ms ends a session at its token's expiry, and
// franz-go re-authenticates before): no goroutine, nothing to stop. A
// refresh that fails while the current token has more than 5 s left is a
// warning (Config.Log), not an error: the token is still good, and the
// endpoint's outage should not cut new connections while it is. The
// endpoint is outside and hostile: https only (http to loopback), no
// redirect followed (the form holds the secret), 10 s and 256 KiB per
// answer, a token of RFC 6750's syntax (anything else could break the
// GS2 message's framing), error text cleaned and bounded before it
// reaches a log. Its failures are TokenErrors; a 4xx other than 408 and
// 429, a redirect, or a success without a usable token is a refusal.
//
// Logger adapts slog for the clients' own logs (kgo.WithLogger), the same
// for every command.
//
// # Failing fast
//
// franz-go retries most connection failures, and would retry a consumer's
// fetches with a wrong password for as long as the process lives, logging
// warnings. Check asks the brokers for metadata once at start-up, retrying
// only what can heal (a broker still starting, a token endpoint
// answering 503), and fails at once, with ErrRefused and a hint, when the
// broker refused the TLS handshake or the SASL authentication, or the
// token endpoint or the AWS credential chain refused to give credentials
// (the hint names which). After start-up the clients' own retries apply: a
// credential revoked while running shows as fetch errors in the logs and
// growing lag, not as an exit.
package kafkaconf
