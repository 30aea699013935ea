package blobstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/agentharness/harness/shared/state/blobstore"
	"github.com/agentharness/harness/shared/wire/awsclient"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// bucket returns an S3 client for the emulator and a new bucket of its own.
func bucket(t *testing.T) (*s3.Client, string) {
	t.Helper()
	if os.Getenv("AWS_ENDPOINT_URL_S3") == "" && os.Getenv("AWS_ENDPOINT_URL") == "" {
		t.Fatal("AWS_ENDPOINT_URL_S3 is not set: run the tests with `make test`, which starts the S3 emulator")
	}
	cfg, err := awsclient.Config(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := awsclient.S3(cfg)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "blobs-" + hex.EncodeToString(b)
	if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: &name}); err != nil {
		t.Fatalf("creating bucket %s: %v", name, err)
	}
	return c, name
}

func TestPutGet(t *testing.T) {
	c, name := bucket(t)
	ctx := context.Background()
	bs := blobstore.NewS3(c, name)

	body := bytes.Repeat([]byte(`{"k":"välue"}`), 10000)
	if err := bs.Put(ctx, "results/ag_x.y/h.json", body); err != nil {
		t.Fatal(err)
	}
	got, err := bs.Get(ctx, "results/ag_x.y/h.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, body) {
		t.Fatalf("Get returned %d bytes, want the %d put", len(got), len(body))
	}

	// Put replaces; an empty blob is a blob.
	if err := bs.Put(ctx, "results/ag_x.y/h.json", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := bs.Get(ctx, "results/ag_x.y/h.json"); err != nil || len(got) != 0 {
		t.Fatalf("Get after putting an empty blob = %q, %v; want empty", got, err)
	}

	if _, err := bs.Get(ctx, "results/missing.json"); !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("Get of a missing key = %v, want ErrNotFound", err)
	}
}

// Copy copies within the bucket, and says ErrNotFound of a missing source; URL serves the blob.
func TestCopyAndURL(t *testing.T) {
	c, name := bucket(t)
	ctx := context.Background()
	bs := blobstore.NewS3(c, name)
	if err := bs.Put(ctx, "a/one", []byte("blob")); err != nil {
		t.Fatal(err)
	}
	if err := bs.Copy(ctx, "a/one", "b/one"); err != nil {
		t.Fatal(err)
	}
	if got, err := bs.Get(ctx, "b/one"); err != nil || string(got) != "blob" {
		t.Fatalf("the copy = %q, %v; want the blob", got, err)
	}
	if err := bs.Copy(ctx, "a/none", "b/none"); !errors.Is(err, blobstore.ErrNotFound) {
		t.Errorf("copying a missing blob: %v, want ErrNotFound", err)
	}
	url, err := bs.URL(ctx, "b/one", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || string(body) != "blob" {
		t.Errorf("GET %s = %d %q, want the blob", url, res.StatusCode, body)
	}
}

// Keys lists what is under a prefix, past a page of results; Delete removes the keys it is given
// (a missing one is no error) and nothing else.
func TestKeysDelete(t *testing.T) {
	c, name := bucket(t)
	ctx := context.Background()
	bs := blobstore.NewS3(c, name)
	var under []string
	for i := range 1005 {
		under = append(under, fmt.Sprintf("skills/acc_a/s/%04d.json", i))
	}
	for _, k := range append(slices.Clone(under), "skills/acc_ab/s/1.json") {
		if err := bs.Put(ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := bs.Keys(ctx, "skills/acc_a/")
	if err != nil || !slices.Equal(keys, under) {
		t.Fatalf("Keys = %d keys, %v; want the %d under the prefix", len(keys), err, len(under))
	}
	if err := bs.Delete(ctx, append(keys, "skills/acc_a/missing")...); err != nil {
		t.Fatal(err)
	}
	if keys, err := bs.Keys(ctx, "skills/"); err != nil || !slices.Equal(keys, []string{"skills/acc_ab/s/1.json"}) {
		t.Errorf("after Delete, Keys = %v, %v; want only the other prefix's", keys, err)
	}
}
