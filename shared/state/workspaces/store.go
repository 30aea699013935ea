package workspaces

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/agentharness/harness/shared/state/blobstore"
	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/agentharness/harness/shared/state/lru"
	"github.com/agentharness/harness/shared/wire/ids"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Store keeps workspaces. The rows sit under the account's partition: the head of each workspace
// (sk ws#<name>) and its commits (sk commit#<name>#<version, zero-padded so they sort>), so that
// one Query lists the workspaces, pages a history, or finds all of a purged account's rows.
type Store struct {
	db    *dynamodb.Client
	table string
	blobs *blobstore.S3
	// cache keeps blobs and trees read recently: an object never changes under its hash, so a
	// later call (the next bash of a turn) reads from S3 only the files that changed since.
	cache *lru.Cache[[]byte]
	now   func() time.Time
}

// blobCacheBytes bounds the blobs and trees a warm function keeps in memory.
const blobCacheBytes = 64 << 20

// commitAttempts bounds how often a commit re-reads the head when other writers' commits keep
// landing between its read and its write.
const commitAttempts = 8

// New returns a store over table and bucket.
func New(db *dynamodb.Client, table string, s3c *s3.Client, bucket string) *Store {
	return &Store{db: db, table: table, blobs: blobstore.NewS3(s3c, bucket), cache: lru.New(blobCacheBytes, func(b []byte) int { return len(b) }), now: time.Now}
}

// Config names the workspaces' table and bucket, as WORKSPACES_TABLE and WORKSPACES_BUCKET set
// them.
type Config struct {
	Table, Bucket string
}

// FromConfig is the store c names; nil when it names neither (the deployment keeps no
// workspaces).
func FromConfig(db *dynamodb.Client, s3c *s3.Client, c Config) (*Store, error) {
	if ok, err := blobstore.Configured("workspaces", "WORKSPACES_TABLE", c.Table, "WORKSPACES_BUCKET", c.Bucket, db != nil && s3c != nil); !ok {
		return nil, err
	}
	return New(db, c.Table, s3c, c.Bucket), nil
}

// The keys are built from the authenticated account and digests the store computed, never from
// a path a client sent, so no read leaves workspaces/<accountId>/.
func accountPrefix(accountID string) string { return "workspaces/" + accountID + "/" }

func blobKey(accountID, sum string) string { return accountPrefix(accountID) + "blobs/" + sum }

func treeKey(accountID, sum string) string { return accountPrefix(accountID) + "trees/" + sum }

func headSK(name string) string { return "ws#" + name }

func commitPrefix(name string) string { return "commit#" + name + "#" }

func commitSK(name string, version int64) string {
	return fmt.Sprintf("%s%010d", commitPrefix(name), version)
}

func key(accountID, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"accountId": ddb.S(accountID), "sk": ddb.S(sk)}
}

// check refuses an account id or a name no workspace could be stored under, as ErrNotFound.
func check(accountID, name string) error {
	if p := ids.Problem(accountID); p != "" {
		return fmt.Errorf("account id %s: %w", p, ErrNotFound)
	}
	if p := NameProblem(name); p != "" {
		return fmt.Errorf("workspace name %s: %w", p, ErrNotFound)
	}
	return nil
}

// emptyTree is version 0's tree.
var emptyTree = &Tree{Files: map[string]Entry{}}

// Create creates an empty workspace at version 0; ErrExists when the account has one of that
// name.
func (s *Store) Create(ctx context.Context, accountID, name string) (Workspace, error) {
	if p := NameProblem(name); p != "" {
		return Workspace{}, &InvalidError{Field: "name", Problem: p}
	}
	if p := ids.Problem(accountID); p != "" {
		return Workspace{}, fmt.Errorf("account id %s", p)
	}
	tree, err := s.putTree(ctx, accountID, emptyTree)
	if err != nil {
		return Workspace{}, err
	}
	now := s.now().UTC()
	ws := Workspace{Name: name, CreatedAt: now, UpdatedAt: now, Tree: tree}
	c := Commit{Version: 0, Parent: -1, At: now, Author: Author{Kind: ByAPI}, Tree: tree, Changes: []PathChange{}}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: &s.table, Item: headItem(accountID, ws), ConditionExpression: aws.String("attribute_not_exists(sk)")}},
		{Put: &types.Put{TableName: &s.table, Item: commitItem(accountID, name, c), ConditionExpression: aws.String("attribute_not_exists(sk)")}},
	}})
	if reasons := ddb.Cancellations(err); len(reasons) > 0 && slices.ContainsFunc(reasons, ddb.CheckFailed) {
		return Workspace{}, fmt.Errorf("workspace %s: %w", name, ErrExists)
	}
	if err != nil {
		return Workspace{}, fmt.Errorf("creating workspace %s: %w", name, err)
	}
	return ws, nil
}

// Get returns the workspace's head, or ErrNotFound.
func (s *Store) Get(ctx context.Context, accountID, name string) (Workspace, error) {
	if err := check(accountID, name); err != nil {
		return Workspace{}, err
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: key(accountID, headSK(name)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Workspace{}, fmt.Errorf("loading workspace %s: %w", name, err)
	}
	if out.Item == nil {
		return Workspace{}, fmt.Errorf("workspace %s: %w", name, ErrNotFound)
	}
	return workspaceFrom(out.Item)
}

// Workspaces lists the account's workspaces, sorted by name.
func (s *Store) Workspaces(ctx context.Context, accountID string) ([]Workspace, error) {
	out := []Workspace{}
	if ids.Problem(accountID) != "" {
		return out, nil
	}
	err := s.query(ctx, accountID, "ws#", func(it map[string]types.AttributeValue) error {
		ws, err := workspaceFrom(it)
		out = append(out, ws)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Names are the names of the account's workspaces, sorted.
func (s *Store) Names(ctx context.Context, accountID string) ([]string, error) {
	all, err := s.Workspaces(ctx, accountID)
	names := make([]string, len(all))
	for i, ws := range all {
		names[i] = ws.Name
	}
	return names, err
}

// query calls fn with each of the account's rows whose sort key starts with prefix ("": all of
// them), in order.
func (s *Store) query(ctx context.Context, accountID, prefix string, fn func(map[string]types.AttributeValue) error) error {
	in := &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    aws.String("accountId = :a"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": ddb.S(accountID)},
		ConsistentRead:            aws.Bool(true),
	}
	if prefix != "" {
		in.KeyConditionExpression = aws.String("accountId = :a AND begins_with(sk, :p)")
		in.ExpressionAttributeValues[":p"] = ddb.S(prefix)
	}
	for p := dynamodb.NewQueryPaginator(s.db, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("listing the workspaces of account %s: %w", accountID, err)
		}
		for _, it := range page.Items {
			if err := fn(it); err != nil {
				return err
			}
		}
	}
	return nil
}

// Commit commits changes over base (a version, or Latest) as one new version. When other
// writers committed since base, it commits over the latest version instead, unless they changed
// one of its paths: that is a *Conflict. Over Latest, the changes land whatever changed. A batch
// that changes nothing (the same bytes written again) makes no commit: it returns the latest
// version with no changes.
func (s *Store) Commit(ctx context.Context, accountID, name string, base int64, changes []Change, author Author) (Commit, error) {
	return s.commit(ctx, accountID, name, base, changes, author, true)
}

// CommitExact is Commit refused with a *Conflict whenever the workspace moved past base, even
// by commits of other paths (then the conflict names no paths).
func (s *Store) CommitExact(ctx context.Context, accountID, name string, base int64, changes []Change, author Author) (Commit, error) {
	return s.commit(ctx, accountID, name, base, changes, author, false)
}

func (s *Store) commit(ctx context.Context, accountID, name string, base int64, changes []Change, author Author, rebase bool) (Commit, error) {
	if err := check(accountID, name); err != nil {
		return Commit{}, err
	}
	if err := checkChanges(changes); err != nil {
		return Commit{}, err
	}
	// Objects go to S3 before the transaction that references them. They are content-addressed,
	// so writing one again is harmless; those of a commit that never lands are garbage, which
	// the account's purge (or a later prune) removes.
	blobs := map[string]string{}
	for _, c := range changes {
		if c.Delete {
			continue
		}
		sum := Digest(c.Data)
		if err := s.blobs.Put(ctx, blobKey(accountID, sum), c.Data); err != nil {
			return Commit{}, err
		}
		blobs[c.Path] = sum
	}
	var baseTree *Tree
	for range commitAttempts {
		head, err := s.Get(ctx, accountID, name)
		if err != nil {
			return Commit{}, err
		}
		if base < Latest || base > head.Version {
			return Commit{}, fmt.Errorf("workspace %s has no version %d: %w", name, base, ErrNotFound)
		}
		headTree, err := s.loadTree(ctx, accountID, head.Tree)
		if err != nil {
			return Commit{}, err
		}
		if base != Latest && base != head.Version {
			if baseTree == nil {
				if baseTree, err = s.Tree(ctx, accountID, name, base); err != nil {
					return Commit{}, err
				}
			}
			if paths := touched(baseTree, headTree, changes); len(paths) > 0 || !rebase {
				return Commit{}, &Conflict{Paths: paths, Head: head.Version}
			}
		}
		next, changed, err := headTree.apply(changes, blobs)
		if err != nil {
			return Commit{}, err
		}
		if len(changed) == 0 {
			c, err := s.Version(ctx, accountID, name, head.Version)
			c.Changes = []PathChange{}
			return c, err
		}
		c, err := s.land(ctx, accountID, head, next, changed, author)
		if errors.Is(err, errOvertaken) {
			continue
		}
		return c, err
	}
	return Commit{}, fmt.Errorf("workspace %s: %w", name, ErrBusy)
}

// checkChanges refuses a batch that is empty, too long, names a path twice or badly, or writes
// a file too large.
func checkChanges(changes []Change) error {
	switch {
	case len(changes) == 0:
		return &InvalidError{Field: "changes", Problem: "is empty"}
	case len(changes) > MaxChanges:
		return &InvalidError{Field: "changes", Problem: fmt.Sprintf("has %d paths, more than %d", len(changes), MaxChanges), TooLarge: true}
	}
	seen := map[string]bool{}
	for _, c := range changes {
		if err := checkPath(c.Path); err != nil {
			return err
		}
		if seen[c.Path] {
			return &InvalidError{Field: "path", Problem: c.Path + " is changed twice in one commit"}
		}
		seen[c.Path] = true
		if len(c.Data) > MaxFileBytes {
			return &InvalidError{Field: "path", Problem: fmt.Sprintf("%s is %d bytes, more than %d", c.Path, len(c.Data), MaxFileBytes), TooLarge: true}
		}
	}
	return nil
}

// touched are the paths of changes that differ between the base and the head, sorted.
func touched(base, head *Tree, changes []Change) []string {
	out := []string{}
	for _, c := range changes {
		before, inBase := base.Files[c.Path]
		after, inHead := head.Files[c.Path]
		if inBase != inHead || before != after {
			out = append(out, c.Path)
		}
	}
	slices.Sort(out)
	return out
}

// errOvertaken: another commit landed between reading the head and writing over it.
var errOvertaken = errors.New("overtaken")

// land writes next's tree and commits it over head in one transaction: the commit's row, which
// must be new, and the head, which must still be at the version read.
func (s *Store) land(ctx context.Context, accountID string, head Workspace, next *Tree, changed []PathChange, author Author) (Commit, error) {
	tree, err := s.putTree(ctx, accountID, next)
	if err != nil {
		return Commit{}, err
	}
	now := s.now().UTC()
	c := Commit{Version: head.Version + 1, Parent: head.Version, At: now, Author: author, Tree: tree, Changes: changed}
	ws := head
	ws.Version, ws.Tree, ws.UpdatedAt = c.Version, tree, now
	ws.Files, ws.Bytes = int64(len(next.Files)), next.Bytes()
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: &s.table, Item: commitItem(accountID, head.Name, c), ConditionExpression: aws.String("attribute_not_exists(sk)")}},
		{Put: &types.Put{
			TableName: &s.table, Item: headItem(accountID, ws),
			ConditionExpression:       aws.String("#version = :read"),
			ExpressionAttributeNames:  map[string]string{"#version": "version"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":read": ddb.N(head.Version)},
		}},
	}})
	if reasons := ddb.Cancellations(err); len(reasons) > 0 && slices.ContainsFunc(reasons, ddb.CheckFailed) {
		return Commit{}, errOvertaken
	}
	if err != nil {
		return Commit{}, fmt.Errorf("committing version %d of workspace %s: %w", c.Version, head.Name, err)
	}
	return c, nil
}

func (s *Store) putTree(ctx context.Context, accountID string, t *Tree) (string, error) {
	content, sum, err := t.encode()
	if err != nil {
		return "", err
	}
	return sum, s.blobs.Put(ctx, treeKey(accountID, sum), content)
}

// loadTree reads a tree object, from memory when this process read it lately (a tree, like a
// blob, never changes under its hash).
func (s *Store) loadTree(ctx context.Context, accountID, sum string) (*Tree, error) {
	key := treeKey(accountID, sum)
	content, ok := s.cache.Get(key)
	if !ok {
		var err error
		if content, err = s.blobs.Get(ctx, key); err != nil {
			return nil, err
		}
		s.cache.Put(key, content)
	}
	var o treeObject
	if err := json.Unmarshal(content, &o); err != nil {
		return nil, fmt.Errorf("tree %s: %w", sum, err)
	}
	if o.Files == nil {
		o.Files = map[string]Entry{}
	}
	return &Tree{Files: o.Files}, nil
}

// Version returns one commit of the workspace (Latest: its latest), or ErrNotFound.
func (s *Store) Version(ctx context.Context, accountID, name string, version int64) (Commit, error) {
	head, err := s.Get(ctx, accountID, name)
	if err != nil {
		return Commit{}, err
	}
	return s.version(ctx, accountID, head, version)
}

func (s *Store) version(ctx context.Context, accountID string, head Workspace, version int64) (Commit, error) {
	if version == Latest {
		version = head.Version
	}
	if version < 0 || version > head.Version {
		return Commit{}, fmt.Errorf("workspace %s has no version %d: %w", head.Name, version, ErrNotFound)
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: key(accountID, commitSK(head.Name, version)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Commit{}, fmt.Errorf("loading version %d of workspace %s: %w", version, head.Name, err)
	}
	if out.Item == nil {
		return Commit{}, fmt.Errorf("workspace %s has no version %d: %w", head.Name, version, ErrNotFound)
	}
	return commitFrom(out.Item)
}

// Tree returns the workspace's tree at version (Latest: its latest).
func (s *Store) Tree(ctx context.Context, accountID, name string, version int64) (*Tree, error) {
	head, err := s.Get(ctx, accountID, name)
	if err != nil {
		return nil, err
	}
	sum := head.Tree
	if version != Latest && version != head.Version {
		c, err := s.version(ctx, accountID, head, version)
		if err != nil {
			return nil, err
		}
		sum = c.Tree
	}
	t, err := s.loadTree(ctx, accountID, sum)
	if err != nil {
		return nil, err
	}
	t.Version = version
	if version == Latest {
		t.Version = head.Version
	}
	return t, nil
}

// Blob returns the bytes of the account's blob sum, as a tree's entry names it: from memory
// when this process read it lately (blobs never change), else from S3. The bytes are shared:
// callers do not change them.
func (s *Store) Blob(ctx context.Context, accountID, sum string) ([]byte, error) {
	key := blobKey(accountID, sum)
	if data, ok := s.cache.Get(key); ok {
		return data, nil
	}
	data, err := s.blobs.Get(ctx, key)
	if errors.Is(err, blobstore.ErrNotFound) {
		return nil, fmt.Errorf("blob %s: %w", sum, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	s.cache.Put(key, data)
	return data, nil
}

// File is a file's bytes at a version.
type File struct {
	Path    string
	Version int64
	Entry
	Data []byte
}

// File returns the file at path in the workspace at version (Latest: its latest); ErrNotFound
// when no file is there.
func (s *Store) File(ctx context.Context, accountID, name, path string, version int64) (File, error) {
	if err := checkPath(path); err != nil {
		return File{}, err
	}
	t, err := s.Tree(ctx, accountID, name, version)
	if err != nil {
		return File{}, err
	}
	e, ok := t.File(path)
	if !ok {
		return File{}, fmt.Errorf("%s at version %d: %w", path, t.Version, ErrNotFound)
	}
	data, err := s.Blob(ctx, accountID, e.Blob)
	if err != nil {
		return File{}, err
	}
	return File{Path: path, Version: t.Version, Entry: e, Data: data}, nil
}

// List lists the directory dir ("" for the root) of the workspace at version (Latest: its
// latest); ErrNotFound when it is no directory.
func (s *Store) List(ctx context.Context, accountID, name, dir string, version int64) ([]DirEntry, int64, error) {
	if dir != "" {
		if err := checkPath(dir); err != nil {
			return nil, 0, err
		}
	}
	t, err := s.Tree(ctx, accountID, name, version)
	if err != nil {
		return nil, 0, err
	}
	entries, ok := t.List(dir)
	if !ok {
		return nil, 0, fmt.Errorf("directory %s at version %d: %w", dir, t.Version, ErrNotFound)
	}
	return entries, t.Version, nil
}

// History returns up to limit commits of the workspace, newest first, from before the version
// cursor names ("" for the latest); the cursor of the next page, or "" after the first commit.
func (s *Store) History(ctx context.Context, accountID, name string, limit int32, cursor string) ([]Commit, string, error) {
	head, err := s.Get(ctx, accountID, name)
	if err != nil {
		return nil, "", err
	}
	if limit < 1 {
		limit = 50
	}
	upTo := head.Version
	if cursor != "" {
		before, err := strconv.ParseInt(cursor, 10, 64)
		if err != nil || before < 1 || before > head.Version+1 {
			return nil, "", &InvalidError{Field: "cursor", Problem: "is not a cursor of this history"}
		}
		upTo = before - 1
	}
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:              &s.table,
		KeyConditionExpression: aws.String("accountId = :a AND sk BETWEEN :from AND :to"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":a": ddb.S(accountID), ":from": ddb.S(commitSK(name, 0)), ":to": ddb.S(commitSK(name, upTo)),
		},
		ScanIndexForward: aws.Bool(false),
		Limit:            aws.Int32(limit),
		ConsistentRead:   aws.Bool(true),
	})
	if err != nil {
		return nil, "", fmt.Errorf("reading the history of workspace %s: %w", name, err)
	}
	commits := make([]Commit, 0, len(out.Items))
	for _, it := range out.Items {
		c, err := commitFrom(it)
		if err != nil {
			return nil, "", err
		}
		commits = append(commits, c)
	}
	next := ""
	if n := len(commits); n > 0 && commits[n-1].Version > 0 {
		next = strconv.FormatInt(commits[n-1].Version, 10)
	}
	return commits, next, nil
}

// Diff returns how the workspace's files differ from version from to version to, sorted by path.
func (s *Store) Diff(ctx context.Context, accountID, name string, from, to int64) ([]PathChange, error) {
	a, err := s.Tree(ctx, accountID, name, from)
	if err != nil {
		return nil, err
	}
	b, err := s.Tree(ctx, accountID, name, to)
	if err != nil {
		return nil, err
	}
	return diff(a, b), nil
}

// Delete deletes the workspace (ErrNotFound when there is none): its commits' rows, then its
// head, on condition that no commit landed meanwhile (else it goes round again). A failure
// midway leaves the workspace, fewer old versions, for a retry to finish; no row outlives the
// head, so the name can be created again at once. Its objects stay: blobs are shared by content
// with the account's other workspaces, so only a prune that sees every tree of the account, or
// the account's purge, may remove them.
func (s *Store) Delete(ctx context.Context, accountID, name string) error {
	for range commitAttempts {
		head, err := s.Get(ctx, accountID, name)
		if err != nil {
			return err
		}
		if err := s.deleteRows(ctx, accountID, commitPrefix(name)); err != nil {
			return err
		}
		_, err = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: &s.table, Key: key(accountID, headSK(name)),
			ConditionExpression:       aws.String("#version = :read"),
			ExpressionAttributeNames:  map[string]string{"#version": "version"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":read": ddb.N(head.Version)},
		})
		if ddb.ConditionFailed(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("deleting workspace %s: %w", name, err)
		}
		return nil
	}
	return fmt.Errorf("workspace %s: %w", name, ErrBusy)
}

// deleteRows deletes the account's rows whose sort key starts with prefix.
func (s *Store) deleteRows(ctx context.Context, accountID, prefix string) error {
	var keys []map[string]types.AttributeValue
	err := s.query(ctx, accountID, prefix, func(it map[string]types.AttributeValue) error {
		keys = append(keys, key(accountID, ddb.String(it, "sk")))
		return nil
	})
	if err != nil {
		return err
	}
	return ddb.Delete(ctx, s.db, s.table, keys)
}

// DeleteAll deletes every workspace of the account, rows and objects, for the purge of a
// deleted account. Deleting twice is harmless.
func (s *Store) DeleteAll(ctx context.Context, accountID string) error {
	if p := ids.Problem(accountID); p != "" {
		return fmt.Errorf("account id %s", p)
	}
	if err := s.deleteRows(ctx, accountID, ""); err != nil {
		return err
	}
	keys, err := s.blobs.Keys(ctx, accountPrefix(accountID))
	if err != nil {
		return err
	}
	return s.blobs.Delete(ctx, keys...)
}

func headItem(accountID string, ws Workspace) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"accountId": ddb.S(accountID), "sk": ddb.S(headSK(ws.Name)), "name": ddb.S(ws.Name),
		"version": ddb.N(ws.Version), "tree": ddb.S(ws.Tree), "files": ddb.N(ws.Files), "bytes": ddb.N(ws.Bytes),
		"createdAt": ddb.S(ws.CreatedAt.Format(time.RFC3339Nano)), "updatedAt": ddb.S(ws.UpdatedAt.Format(time.RFC3339Nano)),
	}
}

func workspaceFrom(it map[string]types.AttributeValue) (Workspace, error) {
	ws := Workspace{Name: ddb.String(it, "name"), Tree: ddb.String(it, "tree")}
	var err error
	if ws.Version, err = ddb.Int(it, "version"); err != nil {
		return Workspace{}, fmt.Errorf("workspace %s: %w", ws.Name, err)
	}
	ws.Files, _ = ddb.Int(it, "files")
	ws.Bytes, _ = ddb.Int(it, "bytes")
	if ws.CreatedAt, err = time.Parse(time.RFC3339Nano, ddb.String(it, "createdAt")); err == nil {
		ws.UpdatedAt, err = time.Parse(time.RFC3339Nano, ddb.String(it, "updatedAt"))
	}
	if err != nil {
		return Workspace{}, fmt.Errorf("workspace %s: %w", ws.Name, err)
	}
	return ws, nil
}

// commitItem is a commit's row. Its changed paths are kept as JSON, which is read back whole
// and is smaller than a list of maps at MaxChanges paths.
func commitItem(accountID, name string, c Commit) map[string]types.AttributeValue {
	changes, _ := json.Marshal(c.Changes)
	author := map[string]types.AttributeValue{"kind": ddb.S(c.Author.Kind)}
	for k, v := range map[string]string{"agentId": c.Author.AgentID, "conversationId": c.Author.ConversationID, "toolCallId": c.Author.ToolCallID} {
		if v != "" {
			author[k] = ddb.S(v)
		}
	}
	return map[string]types.AttributeValue{
		"accountId": ddb.S(accountID), "sk": ddb.S(commitSK(name, c.Version)),
		"version": ddb.N(c.Version), "parent": ddb.N(c.Parent), "at": ddb.S(c.At.Format(time.RFC3339Nano)),
		"author": &types.AttributeValueMemberM{Value: author}, "tree": ddb.S(c.Tree), "changes": ddb.S(string(changes)),
	}
}

func commitFrom(it map[string]types.AttributeValue) (Commit, error) {
	c := Commit{Tree: ddb.String(it, "tree")}
	var err error
	if c.Version, err = ddb.Int(it, "version"); err == nil {
		if c.Parent, err = ddb.Int(it, "parent"); err == nil {
			c.At, err = time.Parse(time.RFC3339Nano, ddb.String(it, "at"))
		}
	}
	if a, ok := it["author"].(*types.AttributeValueMemberM); ok {
		c.Author = Author{Kind: ddb.String(a.Value, "kind"), AgentID: ddb.String(a.Value, "agentId"), ConversationID: ddb.String(a.Value, "conversationId"), ToolCallID: ddb.String(a.Value, "toolCallId")}
	}
	if err == nil {
		err = json.Unmarshal([]byte(ddb.String(it, "changes")), &c.Changes)
	}
	if err != nil {
		return Commit{}, fmt.Errorf("commit %s: %w", ddb.String(it, "sk"), err)
	}
	return c, nil
}
