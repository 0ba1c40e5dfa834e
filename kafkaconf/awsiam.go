package kafkaconf

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/twmb/franz-go/pkg/sasl/aws"
)

// awsExpiryWindow: credentials of the chain are refreshed this long
// before they expire (the SDK's own window for container credentials;
// web identity has none by default), so that a signature never carries
// a key about to lapse.
const awsExpiryWindow = 5 * time.Minute

// awsRetrieveTimeout bounds one look-up of the chain: franz-go calls the
// mechanism with the client's context, which lives as long as the client.
const awsRetrieveTimeout = 30 * time.Second

// CredentialsError is a failure of the AWS credential chain to give
// aws-msk-iam credentials.
type CredentialsError struct{ Err error }

func (e *CredentialsError) Error() string {
	return "kafka aws-msk-iam: no AWS credentials: " + e.Err.Error()
}

func (e *CredentialsError) Unwrap() error { return e.Err }

// Refused reports whether retrying cannot help: every failure but one of
// the network (an STS or metadata endpoint not reachable yet). The SDK has
// retried the calls that can be retried already.
func (e *CredentialsError) Refused() bool {
	var ne net.Error
	return !errors.As(e.Err, &ne)
}

// awsCredentials returns aws-msk-iam's credentials callback. Static
// credentials in the variables (getenv) are read at each authentication,
// as before; without them, the SDK's default chain: web identity (EKS
// IRSA: AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE), the shared
// configuration's profiles, container credentials (ECS, EKS Pod
// Identity) and the EC2 instance role, cached and refreshed
// awsExpiryWindow before they expire.
func awsCredentials(getenv func(string) string) (func(context.Context) (aws.Auth, error), error) {
	if getenv(EnvAWSAccessKeyID) != "" || getenv(EnvAWSSecretAccessKey) != "" {
		return func(context.Context) (aws.Auth, error) {
			a := aws.Auth{AccessKey: getenv(EnvAWSAccessKeyID), SecretKey: getenv(EnvAWSSecretAccessKey), SessionToken: getenv(EnvAWSSessionToken)}
			if a.AccessKey == "" || a.SecretKey == "" {
				return a, fmt.Errorf("kafka aws-msk-iam: %s or %s is empty", EnvAWSAccessKeyID, EnvAWSSecretAccessKey)
			}
			return a, nil
		}, nil
	}
	client := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		// Credentials are fetched every few hours: no idle
		// connection to keep.
		tr.DisableKeepAlives = true
	})
	cfg, err := awsconfig.LoadDefaultConfig(context.Background(),
		awsconfig.WithHTTPClient(client),
		awsconfig.WithCredentialsCacheOptions(func(o *awssdk.CredentialsCacheOptions) { o.ExpiryWindow = awsExpiryWindow }))
	if err != nil {
		return nil, fmt.Errorf("kafka aws-msk-iam: loading the AWS configuration: %w", err)
	}
	if cfg.Credentials == nil {
		return nil, errors.New("kafka aws-msk-iam: the AWS configuration has no credential provider")
	}
	creds := cfg.Credentials
	return func(ctx context.Context) (aws.Auth, error) {
		ctx, cancel := context.WithTimeout(ctx, awsRetrieveTimeout)
		defer cancel()
		c, err := creds.Retrieve(ctx)
		if err != nil {
			return aws.Auth{}, &CredentialsError{Err: err}
		}
		return aws.Auth{AccessKey: c.AccessKeyID, SecretKey: c.SecretAccessKey, SessionToken: c.SessionToken}, nil
	}, nil
}
