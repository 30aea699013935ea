// Package awsclient builds the AWS SDK configuration and clients the functions and the local
// runner share: the default chain in AWS, and the local emulators (DynamoDB Local, LocalStack, the
// SQS/S3 emulator) when an AWS_ENDPOINT_URL* variable points at them.
package awsclient

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	smithyendpoints "github.com/aws/smithy-go/endpoints"

	"github.com/agentharness/harness/shared/wire/reqbody"
)

// Config loads the default configuration. When an endpoint variable (AWS_ENDPOINT_URL_DYNAMODB,
// AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL) is set, the endpoints are
// emulators, which need some credentials and a region but no real ones: without AWS_ACCESS_KEY_ID
// or AWS_PROFILE the credentials are the static "local"/"local", and without a region it is
// us-east-1.
func Config(ctx context.Context) (aws.Config, error) {
	local := isSet("AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
	var opts []func(*config.LoadOptions) error
	if local && !isSet("AWS_ACCESS_KEY_ID", "AWS_PROFILE") {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("local", "local", "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading aws config: %w", err)
	}
	if local && cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return cfg, nil
}

// DynamoDB returns a DynamoDB client for cfg. A turn makes several calls, so each is trimmed:
// headers and body go out in one write (reqbody), and the endpoint is resolved once per table
// and operation kind instead of by the SDK's rules engine on every call.
func DynamoDB(cfg aws.Config) *dynamodb.Client {
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		// DynamoDB Local's response checksums do not match the SDK's; AWS's are checked.
		o.DisableValidateResponseChecksum = isSet("AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL")
		o.HTTPClient = reqbody.Client{Doer: o.HTTPClient}
		o.EndpointResolverV2 = &endpoints{next: o.EndpointResolverV2}
	})
}

// endpoints remembers the endpoints the SDK's resolver gave, by the parameters it was given. The
// parameters are the region, FIPS and dual-stack settings, the base endpoint, the account and
// the table (or tables) of the call, so a cached answer is the one the rules engine would give.
type endpoints struct {
	next dynamodb.EndpointResolverV2
	mu   sync.RWMutex
	seen map[endpointKey]smithyendpoints.Endpoint
}

// endpointKey is dynamodb.EndpointParameters without pointers.
type endpointKey struct {
	region, endpoint, account, accountMode, arn, arns string
	dualStack, fips, search                           int8 // 0 unset, 1 false, 2 true
}

// maxEndpoints bounds the map: a function uses a handful of tables.
const maxEndpoints = 256

func (e *endpoints) ResolveEndpoint(ctx context.Context, p dynamodb.EndpointParameters) (smithyendpoints.Endpoint, error) {
	k := endpointKey{
		region: aws.ToString(p.Region), endpoint: aws.ToString(p.Endpoint), account: aws.ToString(p.AccountId),
		accountMode: aws.ToString(p.AccountIdEndpointMode), arn: aws.ToString(p.ResourceArn),
		arns: strings.Join(p.ResourceArnList, "\x00"), dualStack: tri(p.UseDualStack), fips: tri(p.UseFIPS), search: tri(p.IsSearchOperation),
	}
	e.mu.RLock()
	ep, ok := e.seen[k]
	e.mu.RUnlock()
	if ok {
		return ep, nil
	}
	ep, err := e.next.ResolveEndpoint(ctx, p)
	if err != nil {
		return ep, err
	}
	e.mu.Lock()
	if e.seen == nil {
		e.seen = map[endpointKey]smithyendpoints.Endpoint{}
	}
	if len(e.seen) < maxEndpoints {
		e.seen[k] = ep
	}
	e.mu.Unlock()
	return ep, nil
}

func tri(b *bool) int8 {
	switch {
	case b == nil:
		return 0
	case *b:
		return 2
	}
	return 1
}

func isSet(names ...string) bool {
	for _, name := range names {
		if os.Getenv(name) != "" {
			return true
		}
	}
	return false
}

// SQS returns an SQS client for cfg, sending each request's headers and body in one write.
func SQS(cfg aws.Config) *sqs.Client {
	return sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.HTTPClient = reqbody.Client{Doer: o.HTTPClient} })
}

// S3 returns an S3 client for cfg. Emulators serve buckets by path, not by host name.
func S3(cfg aws.Config) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = isSet("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
	})
}
