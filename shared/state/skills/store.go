package skills

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/state/blobstore"
	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/agentharness/harness/shared/wire/ids"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Store keeps skills: a DynamoDB row per (account, skill) describing its current version, and
// in S3 one immutable object per version holding its content, under
// skills/<accountId>/<name>/<version>.json.
//
// A row also counts the versions handed out ("allocated"), so two uploads never write the same
// version's object: an upload takes the next number, writes its object, then publishes the row
// if it is still at the version it read. A deleted skill keeps that count alone (a row with no
// version is no skill), so a skill uploaded again under its name never reuses a key that a
// deletion's cleanup may still be removing.
type Store struct {
	db    *dynamodb.Client
	table string
	blobs *blobstore.S3
}

// keptVersions is how many versions behind the current one keep their objects, for turns that
// pinned them; older ones are pruned when a version is published.
const keptVersions = 5

// New returns a store over table and bucket.
func New(db *dynamodb.Client, table string, s3c *s3.Client, bucket string) *Store {
	return &Store{db: db, table: table, blobs: blobstore.NewS3(s3c, bucket)}
}

// Config names the skills' table and bucket, as SKILLS_TABLE and SKILLS_BUCKET set them.
type Config struct {
	Table, Bucket string
}

// FromConfig is the store c names; nil when it names neither (the deployment keeps no skills).
func FromConfig(db *dynamodb.Client, s3c *s3.Client, c Config) (*Store, error) {
	if ok, err := blobstore.Configured("skills", "SKILLS_TABLE", c.Table, "SKILLS_BUCKET", c.Bucket, db != nil && s3c != nil); !ok {
		return nil, err
	}
	return New(db, c.Table, s3c, c.Bucket), nil
}

// The keys are built from the authenticated account and a name that passed the grammar, never
// from a path a client sent, so a read never leaves skills/<accountId>/.
func accountPrefix(accountID string) string { return "skills/" + accountID + "/" }

func skillPrefix(accountID, name string) string { return accountPrefix(accountID) + name + "/" }

func objectKey(accountID, name string, version int64) string {
	return skillPrefix(accountID, name) + strconv.FormatInt(version, 10) + ".json"
}

// objectVersion is the version of a key under skillPrefix; false for any other key.
func objectVersion(prefix, key string) (int64, bool) {
	digits, ok := strings.CutSuffix(strings.TrimPrefix(key, prefix), ".json")
	v, err := strconv.ParseInt(digits, 10, 64)
	return v, ok && err == nil && v > 0
}

// keyProblem says what keeps an account id and a name from keying a skill; empty when nothing
// does.
func keyProblem(accountID, name string) string {
	if p := ids.Problem(accountID); p != "" {
		return "account id " + p
	}
	return agentconfig.SkillNameProblem(name)
}

// check refuses an account id or a name that no skill could be stored under, as ErrNotFound.
func check(accountID, name string) error {
	if p := keyProblem(accountID, name); p != "" {
		return fmt.Errorf("%s: %w", p, ErrNotFound)
	}
	return nil
}

func rowKey(accountID, name string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"accountId": ddb.S(accountID), "name": ddb.S(name)}
}

// object is one version's content as stored: files base64-encoded, SKILL.md among them.
type object struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Version     int64             `json:"version"`
	CreatedAt   time.Time         `json:"createdAt"`
	UpdatedAt   time.Time         `json:"updatedAt"`
	Body        string            `json:"body"`
	Files       map[string][]byte `json:"files"`
}

// Put stores b (from ParseZip or ParseFiles) as the skill's next version, creating the skill or
// replacing it; the versions it replaced stay readable through Load until pruned.
func (s *Store) Put(ctx context.Context, accountID string, b *Bundle, now time.Time) (Skill, error) {
	sk, _, err := s.Save(ctx, accountID, b, now)
	return sk, err
}

// Save is Put that also says whether the skill is new. An upload whose publication another
// upload of the same skill overtook tries once more, on top of it; overtaken again it fails with
// ErrConflict.
func (s *Store) Save(ctx context.Context, accountID string, b *Bundle, now time.Time) (Skill, bool, error) {
	if b == nil || b.files == nil {
		return Skill{}, false, errors.New("skills: a bundle comes from ParseZip or ParseFiles")
	}
	if p := keyProblem(accountID, b.Name); p != "" {
		return Skill{}, false, errors.New("skills: " + p)
	}
	sk, created, err := s.save(ctx, accountID, b, now.UTC())
	if errors.Is(err, ErrConflict) {
		sk, created, err = s.save(ctx, accountID, b, now.UTC())
	}
	return sk, created, err
}

// save numbers the next version, writes its object, then publishes it on the row.
func (s *Store) save(ctx context.Context, accountID string, b *Bundle, now time.Time) (Skill, bool, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       rowKey(accountID, b.Name),
		UpdateExpression:          aws.String("SET allocated = if_not_exists(allocated, :zero) + :one"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":zero": ddb.N(0), ":one": ddb.N(1)},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err != nil {
		return Skill{}, false, fmt.Errorf("numbering a version of skill %s: %w", b.Name, err)
	}
	sk := b.Skill
	sk.Version, _ = ddb.Int(out.Attributes, "allocated")
	sk.CreatedAt, sk.UpdatedAt = now, now
	read, err := ddb.Int(out.Attributes, "version")
	published := err == nil
	if published {
		if sk.CreatedAt, err = getTime(out.Attributes, "createdAt"); err != nil {
			return Skill{}, false, err
		}
	}
	content, err := json.Marshal(object{Name: sk.Name, Description: sk.Description, Version: sk.Version, CreatedAt: sk.CreatedAt, UpdatedAt: now, Body: b.Body, Files: b.files})
	if err != nil {
		return Skill{}, false, err
	}
	key := objectKey(accountID, sk.Name, sk.Version)
	if err := s.blobs.Put(ctx, key, content); err != nil {
		return Skill{}, false, err
	}
	if err := s.publish(ctx, accountID, sk, key, read); err != nil {
		return Skill{}, false, err
	}
	s.prune(ctx, accountID, sk.Name, func(v int64) bool { return v < sk.Version-keptVersions })
	return sk, !published, nil
}

// publish makes sk, whose content is under key, the skill's current version, only over the
// version read (0: none): another upload that published meanwhile, or a deletion, is
// ErrConflict.
func (s *Store) publish(ctx context.Context, accountID string, sk Skill, key string, read int64) error {
	files := make([]types.AttributeValue, len(sk.Files))
	for i, f := range sk.Files {
		files[i] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"path": ddb.S(f.Path), "bytes": ddb.N(f.Bytes)}}
	}
	vals := map[string]types.AttributeValue{
		":version": ddb.N(sk.Version), ":description": ddb.S(sk.Description), ":files": &types.AttributeValueMemberL{Value: files}, ":bytes": ddb.N(sk.Bytes),
		":created": ddb.S(sk.CreatedAt.Format(time.RFC3339Nano)), ":updated": ddb.S(sk.UpdatedAt.Format(time.RFC3339Nano)), ":object": ddb.S(key),
	}
	cond := "attribute_exists(allocated) AND attribute_not_exists(#version)"
	if read > 0 {
		cond, vals[":read"] = "#version = :read", ddb.N(read)
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       rowKey(accountID, sk.Name),
		UpdateExpression:          aws.String("SET #version = :version, #description = :description, #files = :files, #bytes = :bytes, createdAt = :created, updatedAt = :updated, objectKey = :object"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  map[string]string{"#version": "version", "#description": "description", "#files": "files", "#bytes": "bytes"},
		ExpressionAttributeValues: vals,
	})
	if ddb.ConditionFailed(err) {
		return fmt.Errorf("skill %s: %w", sk.Name, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("publishing version %d of skill %s: %w", sk.Version, sk.Name, err)
	}
	return nil
}

// prune deletes the skill's objects whose version old says, best effort: what it leaves the
// next prune, or the account's purge, finds again.
func (s *Store) prune(ctx context.Context, accountID, name string, old func(int64) bool) {
	prefix := skillPrefix(accountID, name)
	keys, err := s.blobs.Keys(ctx, prefix)
	if err != nil {
		return
	}
	var gone []string
	for _, k := range keys {
		if v, ok := objectVersion(prefix, k); ok && old(v) {
			gone = append(gone, k)
		}
	}
	_ = s.blobs.Delete(ctx, gone...)
}

// List returns the account's skills, sorted by name (the table's sort key).
func (s *Store) List(ctx context.Context, accountID string) ([]Skill, error) {
	out := []Skill{}
	if ids.Problem(accountID) != "" {
		return out, nil
	}
	err := s.eachRow(ctx, accountID, func(it map[string]types.AttributeValue) error {
		sk, ok, err := skillFrom(it)
		if ok {
			out = append(out, sk)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachRow calls fn with each of the account's rows, in name order: one Query, paged.
func (s *Store) eachRow(ctx context.Context, accountID string, fn func(map[string]types.AttributeValue) error) error {
	in := &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    aws.String("accountId = :a"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": ddb.S(accountID)},
		ConsistentRead:            aws.Bool(true),
	}
	for p := dynamodb.NewQueryPaginator(s.db, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("listing the skills of account %s: %w", accountID, err)
		}
		for _, it := range page.Items {
			if err := fn(it); err != nil {
				return err
			}
		}
	}
	return nil
}

// Names are the names of the account's skills.
func (s *Store) Names(ctx context.Context, accountID string) ([]string, error) {
	all, err := s.List(ctx, accountID)
	names := make([]string, len(all))
	for i, sk := range all {
		names[i] = sk.Name
	}
	return names, err
}

// Get returns the skill's current version, or ErrNotFound.
func (s *Store) Get(ctx context.Context, accountID, name string) (Skill, error) {
	if err := check(accountID, name); err != nil {
		return Skill{}, err
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: rowKey(accountID, name), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Skill{}, fmt.Errorf("loading skill %s: %w", name, err)
	}
	sk, ok, err := skillFrom(out.Item)
	if err == nil && !ok {
		err = fmt.Errorf("skill %s: %w", name, ErrNotFound)
	}
	return sk, err
}

// Load returns the content of one version of the skill: ErrNotFound once the skill is deleted,
// for a version not published yet, and for one pruned since.
func (s *Store) Load(ctx context.Context, accountID, name string, version int64) (*Bundle, error) {
	sk, err := s.Get(ctx, accountID, name)
	if err != nil {
		return nil, err
	}
	if version < 1 || version > sk.Version {
		return nil, fmt.Errorf("skill %s has no version %d: %w", name, version, ErrNotFound)
	}
	return s.object(ctx, accountID, name, version)
}

// LoadCurrent returns the content of the skill's current version.
func (s *Store) LoadCurrent(ctx context.Context, accountID, name string) (*Bundle, error) {
	sk, err := s.Get(ctx, accountID, name)
	if err != nil {
		return nil, err
	}
	return s.object(ctx, accountID, name, sk.Version)
}

func (s *Store) object(ctx context.Context, accountID, name string, version int64) (*Bundle, error) {
	content, err := s.blobs.Get(ctx, objectKey(accountID, name, version))
	if errors.Is(err, blobstore.ErrNotFound) {
		return nil, fmt.Errorf("version %d of skill %s is gone: %w", version, name, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var o object
	if err := json.Unmarshal(content, &o); err != nil || o.Name != name || o.Version != version || o.Files == nil {
		return nil, fmt.Errorf("version %d of skill %s is not a skill object (%v)", version, name, err)
	}
	b := newBundle(o.Name, o.Description, o.Body, o.Files)
	b.Version, b.CreatedAt, b.UpdatedAt = o.Version, o.CreatedAt, o.UpdatedAt
	return b, nil
}

// Delete deletes the skill: its row at once (ErrNotFound when there is none), then its objects,
// best effort (what is left no read reaches, and the account's purge removes).
func (s *Store) Delete(ctx context.Context, accountID, name string) error {
	if err := check(accountID, name); err != nil {
		return err
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &s.table,
		Key:                      rowKey(accountID, name),
		UpdateExpression:         aws.String("REMOVE #version, #description, #files, #bytes, createdAt, updatedAt, objectKey"),
		ConditionExpression:      aws.String("attribute_exists(#version)"),
		ExpressionAttributeNames: map[string]string{"#version": "version", "#description": "description", "#files": "files", "#bytes": "bytes"},
		ReturnValues:             types.ReturnValueAllOld,
	})
	if ddb.ConditionFailed(err) {
		return fmt.Errorf("skill %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("deleting skill %s: %w", name, err)
	}
	// An upload that numbered its version after this deletion keeps its object.
	allocated, _ := ddb.Int(out.Attributes, "allocated")
	s.prune(ctx, accountID, name, func(v int64) bool { return v <= allocated })
	return nil
}

// DeleteAll deletes every skill of the account, rows and objects, for the purge of a deleted
// account. Deleting twice is harmless.
func (s *Store) DeleteAll(ctx context.Context, accountID string) error {
	if p := ids.Problem(accountID); p != "" {
		return fmt.Errorf("account id %s", p)
	}
	err := s.eachRow(ctx, accountID, func(it map[string]types.AttributeValue) error {
		name := ddb.String(it, "name")
		if _, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.table, Key: rowKey(accountID, name)}); err != nil {
			return fmt.Errorf("deleting skill %s of account %s: %w", name, accountID, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	keys, err := s.blobs.Keys(ctx, accountPrefix(accountID))
	if err != nil {
		return err
	}
	return s.blobs.Delete(ctx, keys...)
}

// skillFrom is the skill a row describes; false for a row with no published version.
func skillFrom(it map[string]types.AttributeValue) (Skill, bool, error) {
	version, err := ddb.Int(it, "version")
	if err != nil {
		return Skill{}, false, nil
	}
	sk := Skill{Name: ddb.String(it, "name"), Description: ddb.String(it, "description"), Version: version, Files: []File{}}
	sk.Bytes, _ = ddb.Int(it, "bytes")
	if files, ok := it["files"].(*types.AttributeValueMemberL); ok {
		for _, v := range files.Value {
			if m, ok := v.(*types.AttributeValueMemberM); ok {
				n, _ := ddb.Int(m.Value, "bytes")
				sk.Files = append(sk.Files, File{Path: ddb.String(m.Value, "path"), Bytes: n})
			}
		}
	}
	if sk.CreatedAt, err = getTime(it, "createdAt"); err == nil {
		sk.UpdatedAt, err = getTime(it, "updatedAt")
	}
	return sk, err == nil, err
}

func getTime(it map[string]types.AttributeValue, k string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, ddb.String(it, k))
	if err != nil {
		return time.Time{}, fmt.Errorf("skill %s: %s: %w", ddb.String(it, "name"), k, err)
	}
	return t, nil
}
