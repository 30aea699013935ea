// Package attachments keeps the files of threads (seed 001 section 7): each thread's under keys
// of its own, so a thread reads only its own, and a file that crosses to another thread is
// copied to that thread's keys. A file's id is its content's digest, so a copy keeps its id and
// every reference handed to the receiving thread is valid there.
package attachments

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/agentharness/harness/shared/state/blobstore"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// MaxBytes bounds one file.
const MaxBytes = 512 << 10

// Problem says what keeps a file a client sends from being kept, and in which of its fields
// ("mediaType", "filename"); "" when nothing does. The type and the name go into the note
// that tells the model of the file: a line break there would write lines of the client's own
// into the conversation.
func Problem(mediaType, filename string) (field, problem string) {
	switch {
	case mediaType == "" || len(mediaType) > 255:
		return "mediaType", "is required: the file's media type, such as image/png"
	case strings.ContainsFunc(mediaType, unicode.IsControl):
		return "mediaType", "holds a control character (such as CR or LF): give the file's media type alone, such as image/png"
	case len(filename) > 255:
		return "filename", "is longer than 255 bytes"
	case strings.ContainsFunc(filename, unicode.IsControl):
		return "filename", "holds a control character (such as CR or LF)"
	}
	return "", ""
}

// URLTTL is how long a signed address of a file lasts.
const URLTTL = 15 * time.Minute

// ErrNotFound: the thread holds no file of that id.
var ErrNotFound = errors.New("no such attachment in this conversation")

// IDText is an attachment id as it appears in a text, and IDPattern its grammar.
const (
	IDText    = `att_[0-9a-f]{32}`
	IDPattern = `^` + IDText + `$`
)

var idPattern = regexp.MustCompile(IDPattern)

// ValidID reports whether id is an attachment id.
func ValidID(id string) bool { return idPattern.MatchString(id) }

// Blobs is where the bytes go (blobstore.S3).
type Blobs interface {
	Put(ctx context.Context, key string, body []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
	Copy(ctx context.Context, from, to string) error
	URL(ctx context.Context, key string, ttl time.Duration) (string, error)
}

// Store keeps threads' files.
type Store struct{ blobs Blobs }

// New returns a store over blobs.
func New(blobs Blobs) *Store { return &Store{blobs: blobs} }

// InBucket is a store in an S3 bucket; nil when there is no bucket or no client.
func InBucket(c *s3.Client, bucket string) *Store {
	if c == nil || bucket == "" {
		return nil
	}
	return New(blobstore.NewS3(c, bucket))
}

// key is where a thread's file lives: the account and the thread come from the caller, never
// from a client's input, so no input reaches another thread's keys.
func key(accountID, threadID, id string) string {
	return "attachments/" + accountID + "/" + threadID + "/" + id
}

// ID is the id of a file's content.
func ID(data []byte) string {
	sum := sha256.Sum256(data)
	return "att_" + hex.EncodeToString(sum[:16])
}

// Put keeps data as a file of the thread and returns its id.
func (s *Store) Put(ctx context.Context, accountID, threadID string, data []byte) (string, error) {
	if len(data) > MaxBytes {
		return "", fmt.Errorf("the file takes %d bytes, more than %d", len(data), MaxBytes)
	}
	id := ID(data)
	return id, s.blobs.Put(ctx, key(accountID, threadID, id), data)
}

// Get returns the bytes of the thread's file id.
func (s *Store) Get(ctx context.Context, accountID, threadID, id string) ([]byte, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	data, err := s.blobs.Get(ctx, key(accountID, threadID, id))
	if errors.Is(err, blobstore.ErrNotFound) {
		return nil, ErrNotFound
	}
	return data, err
}

// Copy gives the thread to the file id of the thread from; ErrNotFound when from has none.
func (s *Store) Copy(ctx context.Context, accountID, from, to, id string) error {
	if !ValidID(id) {
		return ErrNotFound
	}
	err := s.blobs.Copy(ctx, key(accountID, from, id), key(accountID, to, id))
	if errors.Is(err, blobstore.ErrNotFound) {
		return ErrNotFound
	}
	return err
}

// URL is a signed, short-lived address of the thread's file id.
func (s *Store) URL(ctx context.Context, accountID, threadID, id string) (string, error) {
	return s.blobs.URL(ctx, key(accountID, threadID, id), URLTTL)
}

// blobDeleter is what DeleteThread needs of Blobs; without it a thread's files are left to the
// bucket's lifecycle.
type blobDeleter interface {
	Keys(ctx context.Context, prefix string) ([]string, error)
	Delete(ctx context.Context, keys ...string) error
}

// DeleteThread deletes every file of the thread, for the deletion of its conversation.
// Deleting twice is harmless.
func (s *Store) DeleteThread(ctx context.Context, accountID, threadID string) error {
	d, ok := s.blobs.(blobDeleter)
	if !ok {
		return nil
	}
	keys, err := d.Keys(ctx, key(accountID, threadID, ""))
	if err != nil {
		return err
	}
	return d.Delete(ctx, keys...)
}
