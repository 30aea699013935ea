// Package awsclient builds the AWS SDK configuration and clients the functions and the local
// runner share: the default chain in AWS, and the local emulators (DynamoDB Local, LocalStack, the
// SQS/S3 emulator) when an AWS_ENDPOINT_URL* variable points at them.
package awsclient

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
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

// DynamoDB returns a DynamoDB client for cfg.
func DynamoDB(cfg aws.Config) *dynamodb.Client {
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		// DynamoDB Local's response checksums do not match the SDK's; AWS's are checked.
		o.DisableValidateResponseChecksum = isSet("AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL")
	})
}

func isSet(names ...string) bool {
	for _, name := range names {
		if os.Getenv(name) != "" {
			return true
		}
	}
	return false
}

// SQS returns an SQS client for cfg.
func SQS(cfg aws.Config) *sqs.Client { return sqs.NewFromConfig(cfg) }

// S3 returns an S3 client for cfg. Emulators serve buckets by path, not by host name.
func S3(cfg aws.Config) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = isSet("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
	})
}
