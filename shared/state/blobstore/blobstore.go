// Package blobstore keeps opaque blobs by key: results too large for a DynamoDB item.
package blobstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// ErrNotFound: no blob under the key.
var ErrNotFound = errors.New("blob not found")

// S3 keeps blobs in one S3 bucket.
type S3 struct {
	c      *s3.Client
	bucket string
}

// NewS3 returns a blob store over bucket.
func NewS3(c *s3.Client, bucket string) *S3 { return &S3{c: c, bucket: bucket} }

// Put stores body under key, replacing what was there.
func (b *S3) Put(ctx context.Context, key string, body []byte) error {
	_, err := b.c.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        &b.bucket,
		Key:           &key,
		Body:          bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
	})
	if err != nil {
		return fmt.Errorf("putting blob %s: %w", key, err)
	}
	return nil
}

// Get returns the blob under key, or an error wrapping ErrNotFound.
func (b *S3) Get(ctx context.Context, key string) ([]byte, error) {
	out, err := b.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: &key})
	if _, ok := errors.AsType[*types.NoSuchKey](err); ok {
		return nil, fmt.Errorf("getting blob %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("getting blob %s: %w", key, err)
	}
	defer out.Body.Close()
	body, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w", key, err)
	}
	return body, nil
}

// Copy copies the blob under from to to, within the bucket; an error wrapping ErrNotFound when
// there is none under from.
func (b *S3) Copy(ctx context.Context, from, to string) error {
	source := b.bucket + "/" + from
	_, err := b.c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &b.bucket, Key: &to, CopySource: &source})
	// CopyObject's errors are not modelled: a missing source is known by its code.
	if ae, ok := errors.AsType[smithy.APIError](err); ok && ae.ErrorCode() == "NoSuchKey" {
		return fmt.Errorf("copying blob %s: %w", from, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("copying blob %s to %s: %w", from, to, err)
	}
	return nil
}

// URL is a signed address from which the blob under key can be read for ttl.
func (b *S3) URL(ctx context.Context, key string, ttl time.Duration) (string, error) {
	req, err := s3.NewPresignClient(b.c).PresignGetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: &key}, s3.WithPresignExpires(ttl))
	if err != nil {
		return "", fmt.Errorf("signing blob %s: %w", key, err)
	}
	return req.URL, nil
}

// Keys lists the keys of the blobs under prefix.
func (b *S3) Keys(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	in := &s3.ListObjectsV2Input{Bucket: &b.bucket, Prefix: &prefix}
	for p := s3.NewListObjectsV2Paginator(b.c, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing blobs under %s: %w", prefix, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys, nil
}

// maxDelete is DeleteObjects's limit on keys in one request.
const maxDelete = 1000

// Delete deletes the blobs under keys; a key with no blob is no error.
func (b *S3) Delete(ctx context.Context, keys ...string) error {
	for start := 0; start < len(keys); start += maxDelete {
		batch := keys[start:min(start+maxDelete, len(keys))]
		objects := make([]types.ObjectIdentifier, len(batch))
		for i, k := range batch {
			objects[i] = types.ObjectIdentifier{Key: aws.String(k)}
		}
		out, err := b.c.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: &b.bucket,
			Delete: &types.Delete{Objects: objects, Quiet: aws.Bool(true)},
		})
		if err != nil {
			return fmt.Errorf("deleting %d blobs: %w", len(batch), err)
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return fmt.Errorf("deleting blob %s: %s (%d of %d failed)", aws.ToString(e.Key), aws.ToString(e.Message), len(out.Errors), len(batch))
		}
	}
	return nil
}

// Configured says whether a store kept in a table and a bucket is configured: true when both
// are named, false when neither is, and an error naming both environment variables (tableVar,
// bucketVar) when one alone is; what names the store ("skills") in the error of a configured
// store without its clients.
func Configured(what, tableVar, table, bucketVar, bucket string, clients bool) (bool, error) {
	switch {
	case table == "" && bucket == "":
		return false, nil
	case table == "" || bucket == "":
		return false, fmt.Errorf("set %s and %s together, or neither", tableVar, bucketVar)
	case !clients:
		return false, fmt.Errorf("%s need a DynamoDB and an S3 client", what)
	}
	return true, nil
}
