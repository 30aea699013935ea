package awsclient

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	smithyendpoints "github.com/aws/smithy-go/endpoints"
	"github.com/google/go-cmp/cmp"
)

// client is what a test can see of the configuration and the DynamoDB client built from it.
type client struct {
	Key, Region, Endpoint string
	SkipChecksums         bool
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want client
	}{
		{
			name: "aws",
			env:  map[string]string{"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_REGION": "eu-west-1"},
			want: client{Key: "AKIDEXAMPLE", Region: "eu-west-1"},
		},
		{
			name: "dynamodb local",
			env:  map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:8000"},
			want: client{Key: "local", Region: "us-east-1", Endpoint: "http://127.0.0.1:8000", SkipChecksums: true},
		},
		{
			name: "localstack",
			env:  map[string]string{"AWS_ENDPOINT_URL": "http://localhost:4566"},
			want: client{Key: "local", Region: "us-east-1", Endpoint: "http://localhost:4566", SkipChecksums: true},
		},
		{
			name: "sqs emulator, dynamodb in aws",
			env:  map[string]string{"AWS_ENDPOINT_URL_SQS": "http://127.0.0.1:9324"},
			want: client{Key: "local", Region: "us-east-1"},
		},
		{
			name: "local endpoint, own credentials and region",
			env: map[string]string{
				"AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:8000",
				"AWS_ACCESS_KEY_ID":         "mine", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_REGION": "eu-west-1",
			},
			want: client{Key: "mine", Region: "eu-west-1", Endpoint: "http://127.0.0.1:8000", SkipChecksums: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolate(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			cfg, err := Config(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			creds, err := cfg.Credentials.Retrieve(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			opts := DynamoDB(cfg).Options()
			got := client{
				Key:           creds.AccessKeyID,
				Region:        cfg.Region,
				Endpoint:      aws.ToString(opts.BaseEndpoint),
				SkipChecksums: opts.DisableValidateResponseChecksum,
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("client (-want +got):\n%s", diff)
			}
		})
	}
}

// isolate clears every variable Config reads and hides the machine's AWS files.
func isolate(t *testing.T) {
	t.Helper()
	for _, name := range []string{
		"AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL",
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION",
	} {
		t.Setenv(name, "")
	}
	none := filepath.Join(t.TempDir(), "none")
	t.Setenv("AWS_CONFIG_FILE", none)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", none)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// countingResolver is the SDK's resolver, counting its calls.
type countingResolver struct {
	calls int
	next  dynamodb.EndpointResolverV2
}

func (c *countingResolver) ResolveEndpoint(ctx context.Context, p dynamodb.EndpointParameters) (smithyendpoints.Endpoint, error) {
	c.calls++
	return c.next.ResolveEndpoint(ctx, p)
}

func TestEndpointsAreResolvedOncePerTableAndSettings(t *testing.T) {
	sdk := &countingResolver{next: dynamodb.NewDefaultEndpointResolverV2()}
	e := &endpoints{next: sdk}
	params := func(region, table string, fips bool) dynamodb.EndpointParameters {
		return dynamodb.EndpointParameters{Region: aws.String(region), ResourceArn: aws.String(table), UseFIPS: aws.Bool(fips), AccountIdEndpointMode: aws.String("disabled")}
	}
	for _, tt := range []struct {
		p         dynamodb.EndpointParameters
		wantHost  string
		wantCalls int
	}{
		{params("eu-west-1", "accounts", false), "dynamodb.eu-west-1.amazonaws.com", 1},
		{params("eu-west-1", "accounts", false), "dynamodb.eu-west-1.amazonaws.com", 1},
		{params("eu-west-1", "agents", false), "dynamodb.eu-west-1.amazonaws.com", 2},
		{params("eu-west-1", "agents", true), "dynamodb-fips.eu-west-1.amazonaws.com", 3},
		{params("us-east-1", "agents", false), "dynamodb.us-east-1.amazonaws.com", 4},
		{params("eu-west-1", "agents", true), "dynamodb-fips.eu-west-1.amazonaws.com", 4},
	} {
		ep, err := e.ResolveEndpoint(t.Context(), tt.p)
		if err != nil {
			t.Fatal(err)
		}
		if ep.URI.Host != tt.wantHost || sdk.calls != tt.wantCalls {
			t.Errorf("%s %s fips=%v: host %s after %d SDK calls; want %s after %d",
				*tt.p.Region, *tt.p.ResourceArn, *tt.p.UseFIPS, ep.URI.Host, sdk.calls, tt.wantHost, tt.wantCalls)
		}
	}
}
