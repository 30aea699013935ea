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
